package units

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// ParseBitRate reads a link rate in bits per second as tc(8) writes rates
// (--rate of hpncp bench, the WAN emulator and the benchmark scripts): a
// number, fractions and exponents allowed ("2.5gbit", "1e9"), with an
// optional prefix k, m, g, t (powers of 1000) or ki, mi, gi, ti (powers of
// 1024), an optional "bit" and an optional "/s", case-insensitive.
// "unlimited" and 0 are 0. A positive rate below 1 bit/s is refused, and
// so is "bps": tc reads it as bytes per second where most people read bits,
// an 8× mistake whichever way it is guessed. Fractional bits are rounded
// down.
func ParseBitRate(s string) (int64, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if v == "unlimited" {
		return 0, nil
	}
	v = strings.TrimSuffix(v, "/s")
	if strings.HasSuffix(v, "bps") {
		return 0, fmt.Errorf("rate %q: %w", s, errBps)
	}
	v = strings.TrimSuffix(v, "bit")
	num, unit := splitUnit(v)
	if num == "" {
		return 0, fmt.Errorf("rate %q: %w", s, errNotBits)
	}
	mult, ok := bitUnits[unit]
	if !ok {
		return 0, fmt.Errorf("rate %q: unknown unit %q (use kbit, mbit, gbit, tbit or kibit…)", s, unit)
	}
	r, err := exact(num, mult)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	if r.Sign() > 0 && r.Cmp(big.NewRat(1, 1)) < 0 {
		return 0, fmt.Errorf("rate %q: below 1 bit/s", s)
	}
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("rate %q: %w", s, errTooLarge)
	}
	return n.Int64(), nil
}

var (
	errNotBits  = errors.New("not a number of bits per second")
	errTooLarge = errors.New("too large")
)

var errBps = errors.New(`"bps" is bytes per second to tc and bits per second to most people: write kbit, mbit or gbit`)

var bitUnits = map[string]int64{
	"":  1,
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40,
}

// ParseBWLimit reads --bwlimit, in bytes per second, as rsync reads its
// --bwlimit: a number alone is KiB/s; with a unit it is ParseSize's size
// per second ("10M" and "10MiB" are 10 MiB/s, "10MB" is 10 MB/s, "512B"
// is 512 bytes/s), fractions allowed, an optional "/s" after it. With
// "bit" after the unit it is a bit rate as tc writes it ("100mbit" is
// 100 Mbit/s, 12.5 MB/s). Unlike rsync, 0 is refused rather than read as
// no limit: leaving the flag out says that.
func ParseBWLimit(s string) (int64, error) {
	v := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "/s")
	var n int64
	var err error
	if strings.HasSuffix(v, "bit") || strings.HasSuffix(v, "bps") {
		n, err = ParseBitRate(v)
		n /= 8
	} else {
		if last := len(v) - 1; last >= 0 && (v[last] >= '0' && v[last] <= '9' || v[last] == '.') {
			v += "k" // rsync's default unit
		}
		n, err = ParseSize(v)
	}
	if err != nil {
		return 0, fmt.Errorf("bandwidth limit %q: %w", s, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("bandwidth limit %q: want at least 1 byte per second", s)
	}
	return n, nil
}

// SCPLimit turns scp's -l, in Kbit/s, into bytes per second. A Kbit is
// 1024 bits there, as OpenSSH's scp and sftp count it, so -l 8 is 1 KiB/s.
func SCPLimit(kbit int64) int64 {
	return kbit * 1024 / 8
}

// splitUnit splits v into its number and the unit after it. A number may
// carry an exponent ("1e9"), so an 'e' followed by a digit or sign stays
// with the number.
func splitUnit(v string) (num, unit string) {
	i := 0
	for i < len(v) {
		c := v[i]
		switch {
		case c >= '0' && c <= '9', c == '.':
			i++
		case c == 'e' && i > 0 && i+1 < len(v) && (v[i+1] >= '0' && v[i+1] <= '9' || v[i+1] == '+' || v[i+1] == '-'):
			i += 2
		default:
			return strings.TrimSpace(v[:i]), strings.TrimSpace(v[i:])
		}
	}
	return v, ""
}

// exact is num × mult as an exact rational: "0.1g" must not pick up
// float rounding.
func exact(num string, mult int64) (*big.Rat, error) {
	// ParseFloat first, for its syntax and because it bounds the exponent
	// that SetString would otherwise expand in memory.
	if _, err := strconv.ParseFloat(num, 64); errors.Is(err, strconv.ErrRange) {
		return nil, errTooLarge
	} else if err != nil {
		return nil, errNotBits
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return nil, errNotBits
	}
	return r.Mul(r, new(big.Rat).SetInt64(mult)), nil
}
