package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hpncp/hpncp/internal/sshdtest"
	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/transfer"
)

// shardCount is how many shards TestShardsUnderParallel runs at once.
const shardCount = 4

// TestShardsUnderParallel splits one tree copy over four hpncp --shard
// runs that GNU parallel starts at once against one real sshd, as a
// migration over several machines (or cores) would, up and down: together
// they copy every file exactly once, the target tree equals the source,
// and hpncp report merge of their reports is the report of the whole
// tree. A re-run of the four skips every file, and the merge of all eight
// reports says so.
func TestShardsUnderParallel(t *testing.T) {
	t.Parallel()
	srv := sshdtest.Start(t, sshdtest.Options{})
	par := gnuParallel(t)
	bin, err := exec.LookPath("hpncp") // the test binary as hpncp (TestMain)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	tree := makeShardTree(t, src)

	t.Run("upload", func(t *testing.T) {
		dst := filepath.Join(dir, "up")
		first := runShards(t, par, bin, srv, "first", src, "e2e:"+dst, dst)
		checkShards(t, first, tree, transfer.StatusCopied)
		checkTreeEq(t, src, filepath.Join(dst, "src"))
		m := mergeShards(t, bin, first...)
		checkMerged(t, m, tree, transfer.StatusCopied)

		// -p kept the times: the same four runs again send nothing.
		again := runShards(t, par, bin, srv, "again", src, "e2e:"+dst, dst)
		checkShards(t, again, tree, transfer.StatusSkipped)
		m = mergeShards(t, bin, append(first, again...)...)
		checkMerged(t, m, tree, transfer.StatusSkipped)
		var sent int64
		for _, r := range first {
			sent += r.report.Totals.Bytes
		}
		if m.Totals.Bytes != sent {
			t.Errorf("merged bytes %d: want the first runs' %d (the re-runs sent none)", m.Totals.Bytes, sent)
		}
	})
	t.Run("download", func(t *testing.T) {
		dst := filepath.Join(dir, "down")
		runs := runShards(t, par, bin, srv, "down", "e2e:"+src, dst, dst)
		checkShards(t, runs, tree, transfer.StatusCopied)
		checkTreeEq(t, src, filepath.Join(dst, "src"))
		checkMerged(t, mergeShards(t, bin, runs...), tree, transfer.StatusCopied)
	})
}

// gnuParallel returns GNU parallel's path; without it the test is
// skipped, or fails under HPNCP_E2E=require. moreutils' parallel, which
// takes other flags, does not count.
func gnuParallel(t *testing.T) string {
	path := sshdtest.LookTool(t, "parallel")
	out, err := exec.Command(path, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "GNU parallel") {
		msg := fmt.Sprintf("%s is not GNU parallel (%v)", path, err)
		if sshdtest.Required() {
			t.Fatalf("%s; run scripts/ensure-deps.sh", msg)
		}
		t.Skipf("%s %s", sshdtest.SkipMarker, msg)
	}
	return path
}

// makeShardTree writes a tree of a few hundred files in nested
// directories, small ones (tar mode's) and a few large enough for the
// parallel pipeline, and returns their paths relative to root's parent,
// as the copies' targets name them below their target directory.
func makeShardTree(t *testing.T, root string) []string {
	var rels []string
	for i := range 300 {
		rel := fmt.Sprintf("d%d/e%d/f%03d", i%5, i%7, i)
		switch i {
		case 7:
			rel = "d2/name with spaces"
		case 8:
			rel = "d3/ünïcödé"
		case 9:
			rel = "top"
		}
		size := int64(i * 131 % 9000)
		if i%100 == 50 {
			size = 3<<20 + int64(i)
		}
		if err := writeNoise(filepath.Join(root, rel), size); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, "src/"+rel)
	}
	if err := os.MkdirAll(filepath.Join(root, "d4/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	slices.Sort(rels)
	return rels
}

// shardRun is one shard's run: its report and the targets it copied
// or skipped, relative to the target directory.
type shardRun struct {
	file   string
	report report.Report
	done   map[string]string // target relative to the target directory: status
}

// runShards runs the four shards of hpncp -rp from src to dst under
// GNU parallel, all at once, each writing its report to a file named
// after label, and returns their runs. dstDir is dst's local path.
func runShards(t *testing.T, par, bin string, srv *sshdtest.Server, label, src, dst, dstDir string) []shardRun {
	t.Helper()
	if err := os.MkdirAll(dstDir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, p := range []string{src, dst, out, bin, srv.ConfigFile} {
		// parallel hands the command line to the shell as it is.
		if strings.ContainsAny(p, " '\"\\$`") {
			t.Fatalf("%q needs quoting for the shell", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"--will-cite", "-j", fmt.Sprint(shardCount), "--halt", "never",
		bin, "-F", srv.ConfigFile, "-B", "-q", "-rp", "--shard", fmt.Sprintf("{}/%d", shardCount), "--json", src, dst,
		">", filepath.Join(out, label+"-{}.json"), ":::"}
	for i := range shardCount {
		args = append(args, fmt.Sprint(i))
	}
	cmd := exec.CommandContext(ctx, par, args...)
	cmd.Env = append(os.Environ(), "PARALLEL_HOME="+t.TempDir(), "HPNCP_NO_CACHE=1", "XDG_STATE_HOME="+t.TempDir())
	// parallel and the copies it starts are a process group of their own,
	// stopped as one (by parallel's PID) should the deadline pass.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	output, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // nothing of it may outlive the test
	}
	if err != nil {
		t.Fatalf("parallel %s: %v\n%s", strings.Join(args, " "), err, output)
	}

	var runs []shardRun
	for i := range shardCount {
		file := filepath.Join(out, fmt.Sprintf("%s-%d.json", label, i))
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		r, err := report.Parse(data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", file, err, data)
		}
		run := shardRun{file: file, report: r, done: map[string]string{}}
		prefix := strings.TrimPrefix(dst, "e2e:") + "/"
		for _, f := range r.Files {
			rel, ok := strings.CutPrefix(strings.TrimPrefix(f.Target, "e2e:"), prefix)
			if !ok {
				t.Errorf("%s: target %q is not below %s", file, f.Target, prefix)
			}
			run.done[rel] = f.Status
		}
		runs = append(runs, run)
	}
	return runs
}

// checkShards checks that runs copied (or skipped: status) each file of
// tree exactly once between them, each run its own shard's, with none
// failed, and that they ran at once.
func checkShards(t *testing.T, runs []shardRun, tree []string, status string) {
	t.Helper()
	by := map[string]string{} // file: the run that had it
	for i, run := range runs {
		r := run.report
		if r.ExitCode != 0 || r.Totals.Failed != 0 || !slices.Equal(r.Shards, []string{fmt.Sprintf("%d/%d", i, shardCount)}) {
			t.Errorf("%s: exit code %d, %d failed, shards %q: want 0, none, shard %d", run.file, r.ExitCode, r.Totals.Failed, r.Shards, i)
		}
		if len(run.done) == 0 || len(run.done) == len(tree) {
			t.Errorf("%s: %d of %d files: the split is lopsided", run.file, len(run.done), len(tree))
		}
		for rel, s := range run.done {
			if s != status {
				t.Errorf("%s: %s %s, want %s", run.file, rel, s, status)
			}
			if other, ok := by[rel]; ok {
				t.Errorf("%s was in %s and %s", rel, other, run.file)
			}
			by[rel] = run.file
		}
	}
	var got []string
	for rel := range by {
		got = append(got, rel)
	}
	slices.Sort(got)
	if !slices.Equal(got, tree) {
		t.Errorf("the shards had %d files, want the tree's %d:\n%s", len(got), len(tree), diffLines(tree, got))
	}
	// At once: some run started before another had ended.
	overlap := false
	for _, a := range runs {
		for _, b := range runs {
			overlap = overlap || a.file != b.file && a.report.Started < b.report.Ended && b.report.Started < a.report.Ended
		}
	}
	if !overlap {
		t.Errorf("the runs did not overlap: parallel ran them one after another")
	}
}

// checkTreeEq compares two trees' names, types and SHA-256s.
func checkTreeEq(t *testing.T, a, b string) {
	t.Helper()
	da, err := describeTree(a, false, false)
	if err != nil {
		t.Fatal(err)
	}
	db, err := describeTree(b, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLines(da, db); d != "" {
		t.Errorf("trees %s and %s differ:\n%s", a, b, d)
	}
}

// mergeShards runs hpncp report merge -o on the runs' reports and reads
// the result back with the schema's checks.
func mergeShards(t *testing.T, bin string, runs ...shardRun) report.Report {
	t.Helper()
	merged := filepath.Join(t.TempDir(), "merged.json")
	args := []string{"report", "merge", "-o", merged}
	for _, r := range runs {
		args = append(args, r.file)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("hpncp %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	data, err := os.ReadFile(merged)
	if err != nil {
		t.Fatal(err)
	}
	m, err := report.Parse(data)
	if err != nil {
		t.Fatalf("%s: %v\n%s", merged, err, data)
	}
	return m
}

// checkMerged checks a merged report: every file of tree once, with
// status, the four shards, exit code 0.
func checkMerged(t *testing.T, m report.Report, tree []string, status string) {
	t.Helper()
	want := []string{}
	for i := range shardCount {
		want = append(want, fmt.Sprintf("%d/%d", i, shardCount))
	}
	if m.ExitCode != 0 || m.Error != nil || !slices.Equal(m.Shards, want) {
		t.Errorf("merged: exit code %d, error %+v, shards %q: want 0, none, %q", m.ExitCode, m.Error, m.Shards, want)
	}
	if m.Totals.Files != len(tree) || len(m.Files) != len(tree) {
		t.Errorf("merged: totals %+v, %d entries: want %d files", m.Totals, len(m.Files), len(tree))
	}
	n := 0
	for _, f := range m.Files {
		if f.Status == status {
			n++
		}
	}
	if n != len(tree) {
		t.Errorf("merged: %d of %d files %s", n, len(tree), status)
	}
}
