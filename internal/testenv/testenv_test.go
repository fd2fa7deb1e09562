package testenv_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/internal/testenv"
)

// recorder stands in for a test to observe whether SkipSlow skips it.
type recorder struct {
	testing.TB
	skipped []string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	for _, a := range args {
		r.skipped = append(r.skipped, a.(string))
	}
	if len(args) == 0 {
		r.skipped = append(r.skipped, "")
	}
}

func setShort(t *testing.T, v string) {
	old := flag.Lookup("test.short").Value.String()
	if err := flag.Set("test.short", v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set("test.short", old) })
}

func TestSkipSlow(t *testing.T) {
	setShort(t, "false")
	r := &recorder{TB: t}
	testenv.SkipSlow(r)
	if len(r.skipped) != 0 {
		t.Fatalf("without -short: skipped with %q, want the test to run", r.skipped)
	}

	setShort(t, "true")
	r = &recorder{TB: t}
	testenv.SkipSlow(r)
	if len(r.skipped) != 1 || !strings.Contains(r.skipped[0], "-short") {
		t.Fatalf("with -short: skipped with %q, want one skip naming -short", r.skipped)
	}
	// .ci/run fails on the e2e marker: a -short skip must not read as one.
	if strings.Contains(r.skipped[0], sshdtest.SkipMarker) {
		t.Errorf("the -short skip %q carries the e2e skip marker %q", r.skipped[0], sshdtest.SkipMarker)
	}
}

// TestCIKnowsSkipMessage keeps .ci/run's guard against a -short run in
// CI in step with the reason SkipSlow gives.
func TestCIKnowsSkipMessage(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "slow='"+testenv.SkipMessage+"'") {
		t.Errorf(".ci/run does not grep for %q", testenv.SkipMessage)
	}
}

// ParallelUnlessSet sets -parallel only when go test was not given one.
func TestParallelUnlessSet(t *testing.T) {
	f := flag.Lookup("test.parallel")
	was := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(was) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	testenv.ParallelUnlessSet(7)
	want := "7"
	if given {
		want = was
	}
	if got := f.Value.String(); got != want {
		t.Errorf("-parallel %s after ParallelUnlessSet(7), want %s (given on the command line: %v)", got, want, given)
	}
}
