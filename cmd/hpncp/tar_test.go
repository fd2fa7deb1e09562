package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	scriptCmds["mkflat"] = cmdMkflat
}

// mkflat DIR COUNT SIZE writes COUNT files of SIZE bytes of noise below
// DIR, spread over ten subdirectories d0 to d9: the many-small-files tree
// tar mode is for. Each file's content differs.
func cmdMkflat(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: mkflat dir count size")
	}
	count, err := strconv.Atoi(args[1])
	ts.Check(err)
	size, err := parseSize(args[2])
	ts.Check(err)
	ts.Check(makeFlat(ts.MkAbs(args[0]), count, size))
}

func makeFlat(root string, count int, size int64) error {
	for i := range 10 {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%d", i)), 0o755); err != nil {
			return err
		}
	}
	buf := make([]byte, size)
	for i := range count {
		for j := range buf {
			buf[j] = byte(i*131 + j*7 + j>>8)
		}
		name := filepath.Join(root, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%05d", i))
		if err := os.WriteFile(name, buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}
