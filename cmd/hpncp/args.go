package main

import "strings"

// getoptArgs rewrites a command line written for getopt, as scp users write
// it, into the form the flag parser takes: clustered short flags are split
// ("-rp" becomes "-r -p"), attached values are detached ("-P2222" becomes
// "-P 2222"), and operands begin after an inserted "--". Like scp, flags
// end at the first operand, so "hpncp a b -r" copies a file named -r.
// valued tells which flag names (without dashes) take a value.
func getoptArgs(args []string, valued func(name string) bool) []string {
	out := make([]string, 0, len(args)+4)
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(append(out, "--"), args[i+1:]...)
		case strings.HasPrefix(a, "--"):
			out = append(out, a)
			name := strings.TrimPrefix(a, "--")
			if !strings.Contains(name, "=") && valued(name) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		case len(a) < 2 || a[0] != '-':
			return append(append(out, "--"), args[i:]...)
		}
		for j := 1; j < len(a); j++ {
			c := a[j : j+1]
			if c >= "0" && c <= "9" {
				// The parser takes "-4" for a negative number, not a flag.
				out = append(out, "--"+c)
			} else {
				out = append(out, "-"+c)
			}
			if !valued(c) {
				continue
			}
			if j+1 < len(a) {
				out = append(out, a[j+1:])
			} else if i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			break
		}
	}
	return append(out, "--")
}
