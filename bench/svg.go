package bench

import (
	"fmt"
	"io"

	"github.com/hpncp/hpncp/internal/svg"
)

// The bar chart's layout, in SVG user units.
const (
	barChartW            = 900.0
	barLabelW, barRightW = 170.0, 110.0
	barTop, barBottom    = 70.0, 50.0
	barH, barGap         = 20.0, 6.0
	dirGap               = 16.0
	barTicks             = 6
)

var dirColor = map[Direction]string{Upload: "#1f77b4", Download: "#ff7f0e"}

// WriteSVG draws rep's table as an SVG chart: per direction, a horizontal
// bar of median MB/s (10^6 bytes per second) per configuration, with a
// line from the slowest run to the fastest, each bar labelled with its
// configuration and median, its tooltip giving every summary figure.
func WriteSVG(w io.Writer, rep *Report) error {
	var maxMB float64
	rows := 0
	for _, d := range []Direction{Upload, Download} {
		for _, row := range rep.Rows {
			if row.Direction == d {
				maxMB = max(maxMB, row.MBpsSummary.Max, row.MBpsSummary.Median)
				rows++
			}
		}
	}
	ticks := svg.Ticks(maxMB, barTicks)
	top := ticks[len(ticks)-1]
	h := barTop + float64(rows)*(barH+barGap) + 2*dirGap + barBottom
	doc := svg.New(barChartW, h)
	x0, x1 := barLabelW, barChartW-barRightW
	xOf := func(mb float64) float64 { return x0 + (x1-x0)*mb/top }

	doc.Text(barChartW/2, 22, "middle", fmt.Sprintf("hpncp bench %s: %s scratch file, %d run(s) per configuration and direction",
		rep.Host, sizeString(rep.Size), rep.Runs))
	if rep.Emulated != "" {
		doc.Text(barChartW/2, 40, "middle", "EMULATED: "+rep.Emulated)
	}
	y := barTop
	bottom := h - barBottom
	for _, v := range ticks {
		doc.Line(xOf(v), barTop-6, xOf(v), bottom, "#ddd", 1, "")
		doc.Text(xOf(v), bottom+16, "middle", svg.Label(v))
	}
	doc.Text((x0+x1)/2, bottom+36, "middle", "MB/s (10^6 bytes per second), median of the runs; the line spans slowest to fastest")
	for _, d := range []Direction{Upload, Download} {
		for _, row := range rep.Rows {
			if row.Direction != d {
				continue
			}
			m := row.MBpsSummary
			tip := fmt.Sprintf("%s %s: median %.2f MB/s, min %.2f, max %.2f, avg %.2f, sd %.2f over %d run(s)",
				row.Config.Name, d, m.Median, m.Min, m.Max, m.Avg, m.SD, len(row.MBps))
			doc.Rect(x0, y, xOf(m.Median)-x0, barH, dirColor[d], tip)
			doc.Line(xOf(m.Min), y+barH/2, xOf(m.Max), y+barH/2, "#333", 1.5, "")
			doc.Text(x0-8, y+barH-5, "end", fmt.Sprintf("%s %s", row.Config.Name, d))
			doc.Text(xOf(max(m.Median, m.Max))+6, y+barH-5, "start", fmt.Sprintf("%.1f MB/s", m.Median))
			y += barH + barGap
		}
		y += dirGap
	}
	doc.Line(x0, barTop-6, x0, bottom, "#333", 1, "")
	_, err := doc.WriteTo(w)
	return err
}
