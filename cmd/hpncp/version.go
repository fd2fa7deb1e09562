package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v3"
)

// Set through -ldflags at release time.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

func versionCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print hpncp's version",
		Action: func(context.Context, *cli.Command) error {
			bi, _ := debug.ReadBuildInfo()
			fmt.Fprintf(stdout, "%s %s %s/%s\n", versionLine(version, commit, date, bi),
				runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// versionLine is "hpncp VERSION (COMMIT, DATE)" from what the release
// build set, else from what the go command recorded: `go install
// …/cmd/hpncp@v1.2.3` records the module's version, a build in a checkout
// the commit it was built from.
func versionLine(v, c, d string, bi *debug.BuildInfo) string {
	if bi != nil {
		if mv := bi.Main.Version; v == "dev" && mv != "" && mv != "(devel)" {
			v = strings.TrimPrefix(mv, "v")
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if c == "none" { // goreleaser's word for a commit it could not learn
		c = ""
	}
	line := "hpncp " + v
	switch {
	case c != "" && d != "":
		line += " (" + c + ", " + d + ")"
	case c != "":
		line += " (" + c + ")"
	}
	return line
}
