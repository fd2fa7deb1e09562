package main

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// mkmany DIR DIRS FILES writes DIRS directories of FILES small files each
// below DIR: every file's content its own (a file sent under another's
// name shows), sizes from 0 to 40 KiB, some executable, times of the
// past on files and directories.
func cmdMkmany(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: mkmany dir dirs files")
	}
	dirs, err := strconv.Atoi(args[1])
	ts.Check(err)
	files, err := strconv.Atoi(args[2])
	ts.Check(err)
	ts.Check(makeMany(ts.MkAbs(args[0]), dirs, files))
}

func makeMany(root string, dirs, files int) error {
	r := rand.New(rand.NewSource(int64(dirs*files + 1)))
	when := time.Unix(1.6e9, 0)
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for f := range files {
			b := make([]byte, r.Intn(40<<10))
			r.Read(b)
			mode := fs.FileMode(0o644)
			if f%7 == 0 {
				mode = 0o755
			}
			name := filepath.Join(dir, fmt.Sprintf("f%04d", f))
			if err := os.WriteFile(name, b, mode); err != nil {
				return err
			}
			if err := os.Chtimes(name, when, when.Add(time.Duration(f)*time.Second)); err != nil {
				return err
			}
		}
		if err := os.Chtimes(dir, when, when.Add(-time.Duration(d)*time.Hour)); err != nil {
			return err
		}
	}
	return nil
}
