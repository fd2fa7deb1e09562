package main

import "strings"

// flagUse is one flag of a command line as split by splitGetopt.
type flagUse struct {
	// name is the flag as the user wrote it, dashes included ("-r",
	// "--streams"), without an attached "=value": what messages name.
	name string
	// words are what the flag parser takes for it: the flag, then its
	// value when it has one.
	words []string
}

// splitGetopt reads a command line written for getopt, as scp users write
// it: clustered short flags are split ("-rp" is -r and -p), attached
// values are detached ("-P2222" is -P with 2222), and, like scp, flags end
// at the first operand, so "hpncp a b -r" copies a file named -r. valued
// tells which flag names (without dashes) take a value.
func splitGetopt(args []string, valued func(name string) bool) (flags []flagUse, operands []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, args[i+1:]
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a, "=")
			f := flagUse{name: name, words: []string{a}}
			if !hasValue && valued(strings.TrimPrefix(name, "--")) && i+1 < len(args) {
				i++
				f.words = append(f.words, args[i])
			}
			flags = append(flags, f)
			continue
		case len(a) < 2 || a[0] != '-':
			return flags, args[i:]
		}
		for j := 1; j < len(a); j++ {
			c := a[j : j+1]
			f := flagUse{name: "-" + c, words: []string{"-" + c}}
			if c >= "0" && c <= "9" {
				// The parser takes "-4" for a negative number, not a flag.
				f.words[0] = "--" + c
			}
			if valued(c) {
				if j+1 < len(a) {
					f.words = append(f.words, a[j+1:])
				} else if i+1 < len(args) {
					i++
					f.words = append(f.words, args[i])
				}
				flags = append(flags, f)
				break
			}
			flags = append(flags, f)
		}
	}
	return flags, nil
}

// getoptArgs rewrites a command line written for getopt (see splitGetopt)
// into the form the flag parser takes: the flags one word each, values
// detached, then "--" and the operands.
func getoptArgs(args []string, valued func(name string) bool) []string {
	flags, operands := splitGetopt(args, valued)
	out := make([]string, 0, len(args)+4)
	for _, f := range flags {
		out = append(out, f.words...)
	}
	return append(append(out, "--"), operands...)
}
