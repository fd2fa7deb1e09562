package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hpncp/hpncp/internal/recommend"
)

// WriteTable prints rep as the HPN-SSH test reports do: per direction a
// header, then per configuration a line of MB/s (min, median, max, avg,
// sd) and under it the seconds of the same runs, in the same columns
// (slowest, median, fastest, avg, sd), then a guide to the names and the
// recommendation.
func WriteTable(w io.Writer, rep *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "hpncp bench %s: %s scratch file, %d run(s) per configuration and direction\n",
		rep.Host, sizeString(rep.Size), rep.Runs)
	if rep.Emulated != "" {
		fmt.Fprintf(&b, "EMULATED path: %s\n", rep.Emulated)
	}
	for _, d := range []Direction{Upload, Download} {
		arrow := "local->" + rep.Host
		if d == Download {
			arrow = rep.Host + "->local"
		}
		fmt.Fprintf(&b, "\n%s (%s)\n", d, arrow)
		fmt.Fprintf(&b, "%-6s %11s %11s %11s %11s %11s\n", "", "min", "med", "max", "avg", "sd")
		for _, row := range rep.Rows {
			if row.Direction != d {
				continue
			}
			m, s := row.MBpsSummary, row.SecSummary
			fmt.Fprintf(&b, "%-6s %11s %11s %11s %11s %11s\n", row.Config.Name,
				mb(m.Min), mb(m.Median), mb(m.Max), mb(m.Avg), mb(m.SD))
			fmt.Fprintf(&b, "%-6s %11s %11s %11s %11s %11s\n", "",
				sec(s.Max), sec(s.Median), sec(s.Min), sec(s.Avg), sec(s.SD))
		}
	}
	b.WriteString("\nGuide:")
	seen := map[string]bool{}
	for _, row := range rep.Rows {
		if !seen[row.Config.Name] {
			seen[row.Config.Name] = true
			fmt.Fprintf(&b, " %s: %s;", row.Config.Name, row.Config.Meaning)
		}
	}
	b.WriteString(" MB/s are 10^6 bytes per second; the seconds line holds the same runs.\n")
	if c, ok := rep.connectMedian(); ok {
		fmt.Fprintf(&b, "Each run is timed from its connected SFTP session to the file in place, as scp's and rsync's meters time a file; connecting (TCP, SSH handshake, authentication, SFTP start) took a further %.3fs (median), not in the figures.\n", c)
	}
	if r := rep.Recommendation; r != nil {
		fmt.Fprintf(&b, "\nRecommendation for %s: %s (%s), median %.1f MB/s", rep.Host, r.Config, recommendedFlags(*r), r.MBps)
		if r.StartStreams > 0 {
			fmt.Fprintf(&b, "; auto got to %d streams", r.StartStreams)
		}
		b.WriteString("\n")
		if ratio, ok := rep.Ratio("hpn", "hpnd"); ok {
			fmt.Fprintf(&b, "hpn/hpnd: %.1fx the throughput of a single stream\n", ratio)
			wide := false
			for _, d := range []Direction{Upload, Download} {
				r, ok := rep.RatioIn("hpn", "hpnd", d)
				if !ok {
					continue
				}
				fmt.Fprintf(&b, "  %-8s %.1fx", d, r.Median)
				if rep.Runs > 1 {
					fmt.Fprintf(&b, " (the runs: %.1fx to %.1fx)", r.Low, r.High)
					wide = wide || r.High > 1.25*r.Low
				}
				b.WriteString("\n")
			}
			if wide {
				b.WriteString("The runs differ by more than a quarter: the demo's two ends share this machine's CPU, and a run slows when something else takes it, or when hpn's controller opens connections the path did not need (each costs a handshake on the same CPU); more --runs give a steadier median.\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Ratio is the median throughput of configuration a over that of b, uploads
// and downloads averaged; false when either is missing or b moved nothing.
func (rep *Report) Ratio(a, b string) (float64, bool) {
	var sa, sb float64
	var na, nb int
	for _, row := range rep.Rows {
		switch row.Config.Name {
		case a:
			sa += row.MBpsSummary.Median
			na++
		case b:
			sb += row.MBpsSummary.Median
			nb++
		}
	}
	if na == 0 || nb == 0 || sb == 0 {
		return 0, false
	}
	return (sa / float64(na)) / (sb / float64(nb)), true
}

// RatioRange is configuration a's throughput over b's in one direction:
// of their medians, and the lowest and highest any two of their runs give.
type RatioRange struct{ Median, Low, High float64 }

// RatioIn is a's throughput over b's in direction d; false when either is
// missing or b moved nothing.
func (rep *Report) RatioIn(a, b string, d Direction) (RatioRange, bool) {
	var ra, rb *Row
	for i := range rep.Rows {
		row := &rep.Rows[i]
		if row.Direction != d {
			continue
		}
		switch row.Config.Name {
		case a:
			ra = row
		case b:
			rb = row
		}
	}
	if ra == nil || rb == nil || rb.MBpsSummary.Min <= 0 {
		return RatioRange{}, false
	}
	sa, sb := ra.MBpsSummary, rb.MBpsSummary
	return RatioRange{Median: sa.Median / sb.Median, Low: sa.Min / sb.Max, High: sa.Max / sb.Min}, true
}

// connectMedian is the median of every run's connection set-up; false
// when the runs were timed on the wall clock, set-up included.
func (rep *Report) connectMedian() (float64, bool) {
	var all []float64
	for _, row := range rep.Rows {
		all = append(all, row.Connect...)
	}
	if len(all) == 0 {
		return 0, false
	}
	return summarize(all).Median, true
}

// WriteJSON prints rep as one JSON document.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func recommendedFlags(r recommend.Recommendation) string {
	switch {
	case r.HPNDisabled:
		return "--hpn-disabled"
	case r.Streams == 0:
		return "--streams auto"
	}
	return fmt.Sprintf("--streams %d", r.Streams)
}

func mb(v float64) string  { return fmt.Sprintf("%.2fMB", v) }
func sec(v float64) string { return fmt.Sprintf("%.3fs", v) }

func sizeString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
