package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

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
			c := commit
			if c == "" {
				if bi, ok := debug.ReadBuildInfo(); ok {
					for _, s := range bi.Settings {
						if s.Key == "vcs.revision" {
							c = s.Value
						}
					}
				}
			}
			fmt.Fprintf(stdout, "hpncp %s", version)
			if c != "" {
				fmt.Fprintf(stdout, " (%s", c)
				if date != "" {
					fmt.Fprintf(stdout, ", %s", date)
				}
				fmt.Fprint(stdout, ")")
			}
			fmt.Fprintf(stdout, " %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
