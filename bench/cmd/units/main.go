// Command units prints sizes and rates as the benchmark scripts need
// them, read by package units, so that a script's --size 1G or --rate
// 1gbit means what the same words mean to hpncp and to the emulator:
//
//	units size 1G        # 1073741824 (bytes; units.ParseSize)
//	units bitrate 1gbit  # 1000000000 (bit/s, 0 unlimited; units.ParseBitRate)
//
// Scripts call it through bench_units in bench/units.sh. It prints one
// number a line, one per argument; a value it cannot read is an error on
// stderr and exit status 2.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/hpncp/hpncp/internal/units"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "units: %v\n", err)
		os.Exit(2)
	}
}

func run(w io.Writer, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: units size|bitrate VALUE...")
	}
	parse := map[string]func(string) (int64, error){
		"size":    units.ParseSize,
		"bitrate": units.ParseBitRate,
	}[args[0]]
	if parse == nil {
		return fmt.Errorf("unknown kind %q: want size or bitrate", args[0])
	}
	out := make([]int64, 0, len(args)-1)
	for _, v := range args[1:] {
		n, err := parse(v)
		if err != nil {
			return err
		}
		out = append(out, n)
	}
	for _, n := range out {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}
