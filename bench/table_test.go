package bench

import (
	"strings"
	"testing"
)

// The ratio of two configurations in one direction: of their medians, and
// the lowest and highest two of their runs give; the table prints each
// direction's and says when the runs differ widely.
func TestRatioIn(t *testing.T) {
	hpn, hpnd := Configs[0], Configs[1]
	row := func(c Config, d Direction, mbps ...float64) Row {
		return Row{Config: c, Direction: d, MBps: mbps, MBpsSummary: summarize(mbps)}
	}
	rep := &Report{Host: "h", Runs: 3, Rows: []Row{
		row(hpn, Upload, 50, 100, 105), row(hpnd, Upload, 34, 35, 36),
		row(hpn, Download, 120, 121, 122), row(hpnd, Download, 35, 36, 37),
	}}
	up, ok := rep.RatioIn("hpn", "hpnd", Upload)
	if !ok || !near(up.Median, 100.0/35) || !near(up.Low, 50.0/36) || !near(up.High, 105.0/34) {
		t.Errorf("upload ratio %+v, %v; want median %.3f, low %.3f, high %.3f", up, ok, 100.0/35, 50.0/36, 105.0/34)
	}
	if _, ok := rep.RatioIn("hpn", "s8", Upload); ok {
		t.Error("a ratio to a configuration that did not run")
	}
	rep.Recommendation = recommendation("h", rep)
	var b strings.Builder
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  upload   2.9x (the runs: 1.4x to 3.1x)\n", "  download 3.4x (the runs: 3.2x to 3.5x)\n", "The runs differ by more than a quarter"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
