package report

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hpncp/hpncp/transfer"
)

// Named is a report to merge and the name messages give it: the
// file it was read from.
type Named struct {
	Name   string
	Report Report
}

// Merge combines the reports of one job, the runs of its shards
// and any re-runs, into one report of the same schema, the one a single
// run of the whole job would have printed:
//
//   - files: every entry of every report, but where more than one report
//     lists the same file (its path and target), only the entry of the
//     run that started last, which says the file's state now: a re-run
//     supersedes the run it repeats;
//   - totals: the runs' counts and bytes summed, less the superseded
//     entries' counts (the bytes stay: they were sent); seconds the time
//     during which some run was copying, so that shards run at once count
//     once; streams the most of any run;
//   - started the earliest, ended the latest; shards those of every run;
//     planned (hpncp sync's) every run's, in the runs' order;
//   - exit_code, by part of the job (the runs of one shard, or of every
//     file): the code of each part's latest run, then the worst over the
//     parts, in the order 0 < 3 (partial) < 1 (failed) < 255 (connection)
//     < 130 (interrupted) < 2 (usage), from a run that went to its end to
//     one that never started; except that failed becomes partial when the
//     merged files include some copied or skipped, as one run's would.
//     The error's message joins those of the failed parts, each after its
//     shard; its kind and hint are the worst part's.
//
// It refuses reports of different jobs: different sources or target,
// where both reports record them, or shards of different splits. It
// refuses a file that two reports of different shards both list as
// copied or skipped: each shard's files are its own, so one of them
// copied a file it should not have. Reports are taken as Parse
// read them.
func Merge(reports []Named) (Report, error) {
	m := Report{Version: Version, Files: []File{}}
	if len(reports) == 0 {
		return m, errors.New("merge reports: no report")
	}
	if err := sameJob(reports); err != nil {
		return m, err
	}
	runs := make([]*mergeRun, len(reports))
	for i, nr := range reports {
		shards, err := parseShards(nr.Report.Shards)
		if err != nil {
			return m, fmt.Errorf("merge reports: %s: %w", nr.Name, err)
		}
		started, _ := time.Parse(time.RFC3339Nano, nr.Report.Started)
		runs[i] = &mergeRun{Named: nr, order: i, started: started, shards: shards}
	}
	// Later runs last, so that what they say of a file wins. Runs
	// without a start time (reports of older versions) count as the
	// earliest, in their order on the command line, as do runs that
	// started at the same time.
	slices.SortStableFunc(runs, func(a, b *mergeRun) int {
		switch {
		case a.started.IsZero() != b.started.IsZero():
			if a.started.IsZero() {
				return -1
			}
			return 1
		}
		return a.started.Compare(b.started)
	})

	if err := m.mergeFiles(runs); err != nil {
		return m, err
	}
	m.mergeRuns(runs)
	m.mergeExit(runs)
	return m, nil
}

// mergeRun is one report being merged.
type mergeRun struct {
	Named
	order   int // on the command line
	started time.Time
	shards  []Shard
}

// part names the part of the job a run covers, for grouping runs:
// its shards, or "" for every file.
func (r *mergeRun) part() string { return strings.Join(r.Report.Shards, ",") }

// disjoint reports whether runs a and b cover separate parts of one
// split, so that no file can be in both.
func disjoint(a, b *mergeRun) bool {
	if len(a.shards) == 0 || len(b.shards) == 0 {
		return false
	}
	for _, s := range a.shards {
		if slices.Contains(b.shards, s) {
			return false
		}
	}
	return true
}

// sameJob refuses reports whose runs were of different jobs: other
// sources, another target, or shards of another split.
func sameJob(reports []Named) error {
	var withOps, withShards *Named
	for i := range reports {
		nr := &reports[i]
		r := nr.Report
		if r.Target != "" || len(r.Sources) > 0 {
			if withOps == nil {
				withOps = nr
			} else if o := withOps.Report; !slices.Equal(o.Sources, r.Sources) || o.Target != r.Target {
				return &transfer.Error{Op: "merge reports", Path: nr.Name,
					Err: fmt.Errorf("a run of another job than %s's: %s to %s, not %s to %s", withOps.Name,
						strings.Join(r.Sources, " "), r.Target, strings.Join(o.Sources, " "), o.Target),
					Hint: "merge only the reports of runs of one command line (bar --shard)"}
			}
		}
		if len(r.Shards) > 0 {
			if withShards == nil {
				withShards = nr
			} else if a, b := withShards.Report.Shards[0], r.Shards[0]; shardCount(a) != shardCount(b) {
				return &transfer.Error{Op: "merge reports", Path: nr.Name,
					Err:  fmt.Errorf("shard %s is of another split than %s's shard %s", b, withShards.Name, a),
					Hint: "merge the reports of one --shard i/n split: the same n"}
			}
		}
	}
	return nil
}

// shardCount is n of a shard "i/n" that Parse has checked.
func shardCount(s string) string {
	_, n, _ := strings.Cut(s, "/")
	return n
}

// mergeFiles fills m.Files and the counts of m.Totals from runs, in
// their order, a later run's entry for a file replacing an earlier's.
func (m *Report) mergeFiles(runs []*mergeRun) error {
	type key struct{ path, target string }
	// The entries of a file, all from the run that listed it last: one
	// run may list a path twice (a directory's failure and a file's).
	type kept struct {
		run *mergeRun
		at  []int // in m.Files
	}
	seen := map[key]kept{}
	var dropped []bool
	for _, run := range runs {
		t := run.Report.Totals
		m.Totals.Files += t.Files
		m.Totals.Copied += t.Copied
		m.Totals.Skipped += t.Skipped
		m.Totals.Failed += t.Failed
		for _, f := range run.Report.Files {
			k := key{f.Path, f.Target}
			prev, ok := seen[k]
			if ok && prev.run == run {
				seen[k] = kept{run, append(prev.at, len(m.Files))}
				m.Files = append(m.Files, f)
				dropped = append(dropped, false)
				continue
			}
			for _, at := range prev.at {
				old := m.Files[at]
				if old.Status != transfer.StatusFailed && f.Status != transfer.StatusFailed && disjoint(prev.run, run) {
					return &transfer.Error{Op: "merge reports", Path: run.Name,
						Err: fmt.Errorf("%s is listed %s by shard %s (%s) and %s by shard %s", f.Path,
							old.Status, prev.run.part(), prev.run.Name, f.Status, run.part()),
						Hint: "each file belongs to one shard: were these runs given the same sources?"}
				}
				dropped[at] = true
				m.Totals.Files--
				switch old.Status {
				case transfer.StatusCopied:
					m.Totals.Copied--
				case transfer.StatusSkipped:
					m.Totals.Skipped--
				case transfer.StatusFailed:
					m.Totals.Failed--
				}
			}
			seen[k] = kept{run, []int{len(m.Files)}}
			m.Files = append(m.Files, f)
			dropped = append(dropped, false)
		}
	}
	files := m.Files[:0]
	for i, f := range m.Files {
		if !dropped[i] {
			files = append(files, f)
		}
	}
	m.Files = files
	slices.SortStableFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return nil
}

// mergeRuns fills in what the runs have in common or add up to: the
// versions, the job, the shards, the times and the rest of the totals.
func (m *Report) mergeRuns(runs []*mergeRun) {
	var versions []string
	var shards []Shard
	all := false
	var first, last time.Time
	// The spans during which a run was copying, to add up without
	// counting twice the time shards ran at once.
	type span struct{ from, to time.Time }
	var spans []span
	var seconds float64
	allEnded := true
	for _, run := range runs {
		r := run.Report
		if r.HPNCP != "" && !slices.Contains(versions, r.HPNCP) {
			versions = append(versions, r.HPNCP)
		}
		if r.Target != "" || len(r.Sources) > 0 {
			m.Sources, m.Target = r.Sources, r.Target
		}
		if len(run.shards) == 0 {
			all = true
		}
		for _, s := range run.shards {
			if !slices.Contains(shards, s) {
				shards = append(shards, s)
			}
		}
		started, _ := time.Parse(time.RFC3339Nano, r.Started)
		ended, err := time.Parse(time.RFC3339Nano, r.Ended)
		if !started.IsZero() && (first.IsZero() || started.Before(first)) {
			first = started
		}
		if !ended.IsZero() && ended.After(last) {
			last = ended
		}
		if err != nil {
			allEnded = false
		} else {
			d := time.Duration(r.Totals.Seconds * float64(time.Second))
			spans = append(spans, span{ended.Add(-d), ended})
		}
		seconds += r.Totals.Seconds
		m.Planned = append(m.Planned, r.Planned...)
		m.Totals.Bytes += r.Totals.Bytes
		m.Totals.ResumedBytes += r.Totals.ResumedBytes
		m.Totals.Streams = max(m.Totals.Streams, r.Totals.Streams)
	}
	m.HPNCP = strings.Join(versions, ", ")
	if !all {
		slices.SortFunc(shards, func(a, b Shard) int { return cmp.Compare(a.Index, b.Index) })
		for _, s := range shards {
			m.Shards = append(m.Shards, s.String())
		}
	}
	if !first.IsZero() {
		m.Started = Time(first)
	}
	if !last.IsZero() {
		m.Ended = Time(last)
	}
	if allEnded {
		// Every run said when it ended: the union of their spans.
		slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
		var union time.Duration
		var reach time.Time
		for _, s := range spans {
			from := s.from
			if from.Before(reach) {
				from = reach
			}
			if s.to.After(from) {
				union += s.to.Sub(from)
				reach = s.to
			}
		}
		seconds = union.Seconds()
	}
	m.Totals.Seconds = seconds
	if seconds > 0 {
		m.Totals.MBPerS = float64(m.Totals.Bytes) / seconds / 1e6
	}
}

// exitRank orders exit codes from best to worst for Merge: from
// a run that went to its end to one that never started. A code hpncp
// does not give ranks as failed.
func exitRank(code int) int {
	switch code {
	case 0:
		return 0
	case 3:
		return 1
	case 255:
		return 3
	case 130:
		return 4
	case 2:
		return 5
	}
	return 2
}

// mergeExit sets m's exit code and error from the latest run of each
// part of the job.
func (m *Report) mergeExit(runs []*mergeRun) {
	latest := map[string]*mergeRun{}
	var parts []string
	for _, run := range runs {
		p := run.part()
		if _, ok := latest[p]; !ok {
			parts = append(parts, p)
		}
		latest[p] = run
	}
	var worst *mergeRun
	var msgs []string
	for _, p := range parts {
		run := latest[p]
		r := run.Report
		if r.ExitCode == 0 {
			continue
		}
		who := run.Name
		if p != "" {
			who = "shard " + p
		}
		msg := fmt.Sprintf("exit code %d", r.ExitCode)
		if r.Error != nil {
			msg = r.Error.Message
		}
		msgs = append(msgs, who+": "+msg)
		if worst == nil || exitRank(r.ExitCode) > exitRank(worst.Report.ExitCode) {
			worst = run
		}
	}
	if worst == nil {
		return
	}
	e := RunError{Kind: KindFailed}
	if worst.Report.Error != nil {
		e = *worst.Report.Error
	}
	m.ExitCode = worst.Report.ExitCode
	if m.ExitCode == 1 && m.Totals.Copied+m.Totals.Skipped > 0 {
		m.ExitCode, e.Kind = 3, KindPartial
	}
	e.Message = strings.Join(msgs, "; ")
	m.Error = &e
}

// MissingShards lists the shards of r's split that r does not cover: the
// runs whose reports a merge lacks. It is empty for a report of every
// file.
func MissingShards(r Report) []string {
	shards, err := parseShards(r.Shards)
	if err != nil || len(shards) == 0 {
		return nil
	}
	var missing []string
	for i := range shards[0].Count {
		s := Shard{i, shards[0].Count}
		if !slices.Contains(shards, s) {
			missing = append(missing, s.String())
		}
	}
	return missing
}
