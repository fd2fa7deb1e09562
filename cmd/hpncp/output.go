package main

import (
	"fmt"
	"io"

	"github.com/hpncp/hpncp/internal/vis"
)

// logTo returns a Logf that prints each line to w as "hpncp: ...",
// escaped (vis): the lines name files and repeat what servers said, and
// neither may reach the terminal raw.
func logTo(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, "hpncp: %s\n", vis.String(fmt.Sprintf(format, args...)))
	}
}
