// Command hpncp copies files over SSH, scp-style, with a pipeline tuned
// for long fat networks. See `hpncp --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(mainExit()) }

// mainExit runs hpncp on the process's arguments and streams and returns
// its exit code. SIGINT and SIGTERM cancel the run, which then cleans up;
// a second signal kills at once, as users expect of a stuck program.
func mainExit() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return report(os.Stderr, run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr))
}
