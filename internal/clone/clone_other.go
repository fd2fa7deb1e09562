//go:build !linux

package clone

import "os"

func into(dst, src *os.File) bool { return false }

func same(a, b os.FileInfo) bool { return false }
