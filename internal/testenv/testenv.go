// Package testenv decides which tests the quick loop, go test -short,
// leaves out, and how many of a package's parallel tests run at once; and
// builds the hpncp binary for the tests that need a program, not a
// function (a helper for a real sshd to run, rsync's remote shell).
package testenv

import (
	"context"
	"flag"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// SkipMessage is the reason SkipSlow gives. It differs from the e2e
// harness's skip marker on purpose: a skip asked for with -short is not
// lost coverage, and make test, which CI runs, never passes -short.
const SkipMessage = "slow: runs without -short"

// SkipSlow skips t under go test -short. It marks what makes the full
// suite take minutes: a real sshd, fault trials, large copies, and waits
// for stalls, timeouts and signals.
func SkipSlow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip(SkipMessage)
	}
}

// ParallelUnlessSet lets n parallel tests run at once when go test was
// given no -parallel (its default is one a CPU). A package whose tests
// spend their time waiting, on child processes, servers, bandwidth limits
// and stalls they set up, calls it from TestMain before m.Run: one test a
// CPU leaves a small machine half idle. It parses the test binary's
// flags, so a TestMain that also serves as another program's main (as
// testscript's does) calls it only for the test run.
func ParallelUnlessSet(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		panic(err)
	}
}

// BuildHpncp builds cmd/hpncp into dir and returns its path. Build it
// before setting XDG_CACHE_HOME in a test: the Go build cache follows it.
func BuildHpncp(t testing.TB, dir string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("build hpncp: %v", err)
	}
	bin := filepath.Join(dir, "hpncp")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, "github.com/hpncp/hpncp/cmd/hpncp").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/hpncp: %v\n%s", err, out)
	}
	return bin
}
