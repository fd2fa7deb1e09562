package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/hostile"
)

// The confinement property test (issue 33): a seed draws a hostile tree
// and a sequence of two to four runs of hpncp receiving it, each on a
// front end of its own, the server's tree redrawn between runs (so that
// a directory becomes a link to the sentinel, to .., to an absolute path,
// a name is listed twice, a link goes through a link, a hard-link group
// names a path through a link, a STAT disagrees with the listing). After
// every run, whatever its exit, nothing outside the target may have
// changed or appeared: an escape.
//
// make test runs confineCISeeds; HPNCP_CONFINE_TRIALS=N runs N seeds from
// HPNCP_CONFINE_SEED (default 1) on, and HPNCP_CONFINE_REPORT names a
// file the counts per front end are appended to (make confine).

// confineCISeeds are the seeds every make test runs.
var confineCISeeds = func() []uint64 {
	s := make([]uint64, 20)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}()

// confineRuns are the front ends a trial draws its runs from.
var confineRuns = []frontEnd{
	{name: "r", args: []string{"-r"}},
	{name: "r-links", args: []string{"-r", "--links"}},
	{name: "tar", args: []string{"-r", "--tar"}},
	{name: "legacy", args: []string{"-r", "-O"}},
	{name: "resume", args: []string{"-r", "--resume"}},
	{name: "sync-a", args: []string{"-a"}, sync: true},
	{name: "sync-aH-delete", args: []string{"-aH", "--delete"}, sync: true},
	{name: "sync-a-safe-links", args: []string{"-a", "--safe-links"}, sync: true},
	// Files whose old version the target has go as deltas, through the
	// hostile server's helper (hostile.HelperPath).
	// (-v and -vv: their logs say when a file went as one, counted as
	// "deltas", and when the helper walked the remote tree, "walked".)
	{name: "r-delta", args: []string{"-r", "-v", "--delta", "--helper-path", hostile.HelperPath}},
	{name: "sync-a-delta", args: []string{"-a", "-vv", "--helper-path", hostile.HelperPath}, sync: true},
	// One file's sync: its delta asked for as the helper starts, against
	// the target a run before left (a file, or a link the server made).
	{name: "sync-a-file", args: []string{"-a", "-vv", "--helper-path", hostile.HelperPath}, sync: true, file: "big"},
	// --inplace: the pulled deltas rewrite the targets where they lie.
	{name: "sync-a-inplace", args: []string{"-a", "-vv", "--inplace", "--helper-path", hostile.HelperPath}, sync: true},
	// Files that go whole are written over their targets too.
	{name: "r-inplace", args: []string{"-r", "--inplace"}},
	{name: "sync-aW-inplace", args: []string{"-aW", "--inplace"}, sync: true},
}

// confineLimit bounds one run of a trial: trees are a few entries, and a
// run that outlives this has followed a loop of links without bound; it
// is stopped and counted, as "stopped".
const confineLimit = 5 * time.Second

// confineCounts are the outcomes of the runs of one front end.
type confineCounts struct{ runs, exit0, failed, timeouts, escapes, deltas, walked int }

func TestConfine(t *testing.T) {
	seeds := confineCISeeds
	if n := os.Getenv("HPNCP_CONFINE_TRIALS"); n != "" {
		trials, err := strconv.Atoi(n)
		if err != nil || trials < 1 {
			t.Fatalf("HPNCP_CONFINE_TRIALS=%q: want a number of trials", n)
		}
		first := uint64(1)
		if s := os.Getenv("HPNCP_CONFINE_SEED"); s != "" {
			if first, err = strconv.ParseUint(s, 10, 64); err != nil {
				t.Fatalf("HPNCP_CONFINE_SEED=%q: %v", s, err)
			}
		}
		seeds = nil
		for i := range uint64(trials) {
			seeds = append(seeds, first+i)
		}
	}
	// Trials run as many at once as go test's -parallel allows: most of
	// a trial's time goes in waiting for the server. Their resume
	// journals share one directory, an entry per target.
	hostileEnv(t)
	var mu sync.Mutex
	counts := map[string]*confineCounts{}
	t.Cleanup(func() {
		report := confineReport(len(seeds), counts)
		t.Log("\n" + report)
		// The helper's syncs must reach the hostile server's helper: a
		// launch line it no longer answers leaves them listing over
		// SFTP, and this test blind to the helper's walk.
		helperRuns, walked := 0, 0
		for _, n := range []string{"sync-a-delta", "sync-a-inplace"} {
			if c := counts[n]; c != nil {
				helperRuns, walked = helperRuns+c.runs, walked+c.walked
			}
		}
		if helperRuns >= 6 && walked == 0 {
			t.Errorf("%d runs through the hostile server's helper, none listed by its walk", helperRuns)
		}
		if path := os.Getenv("HPNCP_CONFINE_REPORT"); path != "" {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				_, err = f.WriteString(report)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				t.Errorf("write the confinement report: %v", err)
			}
		}
	})
	for _, seed := range seeds {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			for name, n := range confineTrial(t, seed) {
				mu.Lock()
				c := counts[name]
				if c == nil {
					c = &confineCounts{}
					counts[name] = c
				}
				c.runs += n.runs
				c.exit0 += n.exit0
				c.failed += n.failed
				c.timeouts += n.timeouts
				c.escapes += n.escapes
				c.deltas += n.deltas
				c.walked += n.walked
				mu.Unlock()
			}
		})
	}
}

func confineReport(trials int, counts map[string]*confineCounts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "confinement trials: %d\n%-20s %6s %8s %8s %8s %8s %8s %8s\n", trials, "front end", "runs", "exit 0", "failed", "stopped", "escapes", "deltas", "walked")
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	var total confineCounts
	for _, n := range names {
		c := counts[n]
		fmt.Fprintf(&b, "%-20s %6d %8d %8d %8d %8d %8d %8d\n", n, c.runs, c.exit0, c.failed, c.timeouts, c.escapes, c.deltas, c.walked)
		total.deltas += c.deltas
		total.walked += c.walked
		total.runs += c.runs
		total.exit0 += c.exit0
		total.failed += c.failed
		total.timeouts += c.timeouts
		total.escapes += c.escapes
	}
	fmt.Fprintf(&b, "%-20s %6d %8d %8d %8d %8d %8d %8d\n", "all", total.runs, total.exit0, total.failed, total.timeouts, total.escapes, total.deltas, total.walked)
	return b.String()
}

// confineTrial runs the trial of seed and returns its counts by front
// end; an escape fails t with the command that re-runs the trial.
func confineTrial(t *testing.T, seed uint64) map[string]confineCounts {
	rng := rand.New(rand.NewPCG(seed, 0x5e1f))
	c := newConfinement(t)
	tr := confineTree(rng, c.outside)
	srv := hostile.Start(t, hostile.Options{Tree: tr})
	rerun := fmt.Sprintf("HPNCP_CONFINE_SEED=%d HPNCP_CONFINE_TRIALS=1 go test -count=1 -v -run '^TestConfine$' ./cmd/hpncp", seed)
	counts := map[string]confineCounts{}
	runs := 2 + rng.IntN(3)
	var done []string
	for i := range runs {
		f := confineRuns[rng.IntN(len(confineRuns))]
		if i > 0 {
			tr = confineTree(rng, c.outside)
			srv.SetTree(tr)
		}
		done = append(done, f.name)
		t.Logf("run %d, %s, of the tree:\n%s", i+1, f.name, tr)
		code, stderr, timedOut := runHostileFor(t, srv, confineLimit, f.argv(t, c)...)
		n := counts[f.name]
		n.runs++
		if strings.Contains(stderr, " bytes sent, ") {
			n.deltas++ // a file went as a delta (transfer.copyDelta's log)
		}
		if strings.Contains(stderr, " by its helper: ") {
			n.walked++ // the lister took the helper's walk (mirror's log)
		}
		switch {
		case timedOut:
			// Not an escape: a loop of links followed without bound, or
			// a listing that never ends (TestHostileEndlessTree holds
			// sync to its bounds). What it wrote is checked all the same.
			n.timeouts++
			t.Logf("run %d (%s) was stopped after %v", i+1, f.name, confineLimit)
		case code == 0:
			n.exit0++
		default:
			n.failed++
		}
		if e := c.escapes(t); len(e) > 0 {
			n.escapes++
			counts[f.name] = n
			t.Errorf("ESCAPE after runs %s (seed %d), exit %d:\n\t%s\nstderr:\n%s\nre-run: %s",
				strings.Join(done, ", "), seed, code, strings.Join(e, "\n\t"), stderr, rerun)
			return counts
		}
		counts[f.name] = n
	}
	return counts
}

// confineNames are the names a tree's hostile entries take, the same in
// every run so that one run's directory is the next one's link; x, f and
// sub are the sentinel's names too, so that a write through a link lands
// on them.
var confineNames = []string{"d", "e", "k"}

// confineTree draws a hostile tree whose links reach outside (the
// sentinel, absolute) in the ways issue 33 lists.
func confineTree(rng *rand.Rand, outside string) *hostile.Tree {
	tr := hostile.NewTree()
	tr.File("src/a", "a\n")
	// A file large enough for a delta, mostly the same from run to run,
	// at the top or below a name that may be a link by the next run; its
	// delta sometimes damaged.
	big := bytes.Repeat([]byte("a block of the file that stays "), 4000)
	big = append(big, bytes.Repeat([]byte{'+'}, rng.IntN(100))...) // a size of its own: sync's quick check sends it
	for range rng.IntN(4) {
		off := rng.IntN(len(big) - 100)
		copy(big[off:], fmt.Sprintf("changed %d", rng.Uint64()))
	}
	bigAt := "src/big"
	if rng.IntN(3) == 0 {
		bigAt = "src/" + confineNames[rng.IntN(len(confineNames))] + "/big"
	}
	tr.File(bigAt, string(big))
	if rng.IntN(4) == 0 {
		tr.DeltaFlip = 1 + rng.Int64N(2000)
	}
	dir := func(p string) {
		tr.DirAt(p)
		tr.File(p+"/x", fmt.Sprintf("evil %d\n", rng.IntN(1000)))
		tr.Add(p, hostile.Entry{Name: "sub", Kind: hostile.Dir, Mode: 0o777})
		tr.File(p+"/sub/x", "evil sub/x\n")
		if rng.IntN(2) == 0 {
			tr.File(p+"/f", "evil f\n")
		}
	}
	links := []string{outside, outside + "/sub", "..", "../..", "../../outside", "d/../../outside", "e/..", "k/x", "/"}
	for _, n := range confineNames {
		p := "src/" + n
		link := links[rng.IntN(len(links))]
		switch rng.IntN(6) {
		case 0, 1:
			dir(p)
		case 2:
			tr.Link(p, link)
		case 3: // a directory, then the same name as a link
			dir(p)
			tr.Link(p, link)
		case 4: // a link, then the same name as a directory
			tr.Link(p, link)
			dir(p)
		case 5: // a link that STAT calls a directory
			tr.Link(p, link)
			if tr.Stat == nil {
				tr.Stat = map[string]hostile.Entry{}
			}
			tr.Stat[p] = hostile.Entry{Name: n, Kind: hostile.Dir}
		}
	}
	// A hard-link group whose names go through the entries above, which
	// may be links out of the tree by the time they are linked.
	if rng.IntN(2) == 0 {
		tr.Add("src", hostile.Entry{Name: "h", Kind: hostile.File, Data: []byte("evil h\n"), Dev: 1, Ino: 7})
		for _, n := range confineNames {
			if rng.IntN(2) == 0 {
				tr.FindExtra = append(tr.FindExtra, "1 7 "+n+"/x", "1 7 "+n+"/sub/x")
			}
		}
	}
	return tr
}
