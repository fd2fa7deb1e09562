// Package units reads the sizes and rates that hpncp's flags, hpncp bench,
// the WAN emulator and the benchmark scripts take, so that "4M" or "1gbit"
// means one thing wherever it is written.
//
// Sizes (ParseSize) follow dd: K, M, G, T and KiB… are powers of 1024, KB…
// powers of 1000. Bit rates (ParseBitRate) follow tc(8): kbit, mbit, gbit
// are powers of 1000 bits. --bwlimit (ParseBWLimit) follows rsync's
// --bwlimit, and -l (SCPLimit) follows scp's -l. Values that are handed
// to tc as well as to the emulator use tc's own size syntax (ParseTCSize).
package units
