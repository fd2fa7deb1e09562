// Command hpncp copies files over SSH, scp-style, with a pipeline tuned
// for long fat networks. See `hpncp --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() { os.Exit(mainExit()) }

// mainExit runs hpncp on the process's arguments and streams and returns
// its exit code. SIGINT and SIGTERM cancel the run, which then cleans up;
// a second signal ends the process at once, as users expect of a stuck
// program, whatever still waits (a server that stopped answering).
func mainExit() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		<-sig
		cancel()
		<-sig
		fmt.Fprintln(os.Stderr, "hpncp: interrupted")
		os.Exit(exitInterrupted)
	}()
	// HPNCP_CPUPROFILE (undocumented, for benchmarking) writes a CPU
	// profile of the run, so that the hot path can be measured on real
	// transfers rather than guessed.
	if path := os.Getenv("HPNCP_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hpncp: error: start CPU profile %s: %v\n", path, err)
			return exitFailed
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	// HPNCP_MEMPROFILE (undocumented, for benchmarking) writes a heap
	// profile near the run's peak, to find what grows with the files.
	if path := os.Getenv("HPNCP_MEMPROFILE"); path != "" {
		stop, err := startMemProfile(ctx, path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hpncp: error: start heap profile %s: %v\n", path, err)
			return exitFailed
		}
		defer stop()
	}
	return reportError(os.Stderr, run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr))
}
