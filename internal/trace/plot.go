package trace

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hpncp/hpncp/internal/svg"
)

// The chart's size and its plot area's margins, in SVG user units.
const (
	plotW, plotH                  = 960.0, 520.0
	left, right, top, bottom      = 80.0, 80.0, 60.0, 70.0
	goodputColor, streamsColor    = "#1f77b4", "#2ca02c"
	starvedColor                  = "#aec7e8" // a point the controller skipped
	connsColor, decisionColor     = "#9467bd", "#d62728"
	gridColor, axisColor          = "#ddd", "#333"
	xTicks, yTicks                = 8, 5
	pointRadius, markerHalf       = 3.0, 5.0
	goodputWidth, stepWidth       = 1.5, 1.5
	connsDash                     = "5,3"
	decisionLineDash              = "2,3"
	legendY, titleY               = 42.0, 22.0
	legendSwatch, legendItemWidth = 18.0, 150.0
)

// The strips under the plot: one row per connection, an interval's
// verdict (limited_by) in its color.
const (
	stripTop, stripRow, stripGap = 52.0, 9.0, 2.0
	maxStrips                    = 32
)

// limitColors are the verdicts' colors, in the legend's order.
var limitColors = []struct{ verdict, color string }{
	{"rwnd", "#e377c2"}, {"sndbuf", "#ff7f0e"}, {"loss", "#d62728"},
	{"cwnd", "#2ca02c"}, {"app", "#7f7f7f"}, {"recv", "#17becf"},
}

// Plot draws t as an SVG chart titled with name: goodput (MB/s, 10^6
// bytes per second) over time as a line with a point per interval, the
// plan's streams and connections as step lines on the right axis, and a
// marker at the top for each decision, its reason in the marker's
// tooltip. Each point's tooltip tells the interval and its connections.
// Under the time axis, a strip per connection (the first maxStrips)
// shows what limited it in each interval.
func Plot(w io.Writer, t *Trace, name string) error {
	conns := connIDs(t)
	h := plotH
	if len(conns) > 0 {
		// The strips and their legend replace the bottom margin.
		h = plotH - bottom + stripTop + float64(len(conns))*(stripRow+stripGap) + 30
	}
	d := svg.New(plotW, h)
	x0, x1, y0, y1 := left, plotW-right, top, plotH-bottom

	var maxT, maxG float64
	maxN := 5
	for _, iv := range t.Intervals {
		maxT = max(maxT, iv.Time.Seconds())
		maxG = max(maxG, iv.Goodput/1e6)
		maxN = max(maxN, iv.Streams, iv.Conns)
	}
	tt, gt, nt := svg.Ticks(maxT, xTicks), svg.Ticks(maxG, yTicks), svg.Ticks(float64(maxN), yTicks)
	tmax, gmax, nmax := tt[len(tt)-1], gt[len(gt)-1], nt[len(nt)-1]
	xOf := func(sec float64) float64 { return x0 + (x1-x0)*sec/tmax }
	gOf := func(mb float64) float64 { return y1 - (y1-y0)*mb/gmax }
	nOf := func(n int) float64 { return y1 - (y1-y0)*float64(n)/nmax }

	d.Text(plotW/2, titleY, "middle", fmt.Sprintf("hpncp trace: %s (%d intervals)", name, len(t.Intervals)))
	for _, v := range gt {
		d.Line(x0, gOf(v), x1, gOf(v), gridColor, 1, "")
		d.Text(x0-6, gOf(v)+4, "end", svg.Label(v))
	}
	for _, v := range nt {
		d.Text(x1+6, y1-(y1-y0)*v/nmax+4, "start", svg.Label(v))
	}
	for _, v := range tt {
		d.Line(xOf(v), y1, xOf(v), y1+5, axisColor, 1, "")
		d.Text(xOf(v), y1+18, "middle", svg.Label(v))
	}
	d.Line(x0, y1, x1, y1, axisColor, 1, "")
	d.Line(x0, y0, x0, y1, axisColor, 1, "")
	d.Line(x1, y0, x1, y1, axisColor, 1, "")
	d.Text((x0+x1)/2, y1+36, "middle", "time since the run started (s)")
	d.TextRotated(x0-50, (y0+y1)/2, "goodput (MB/s)")
	d.TextRotated(x1+50, (y0+y1)/2, "streams, connections")
	legend(d, x0)

	if len(t.Intervals) == 0 {
		d.Text((x0+x1)/2, (y0+y1)/2, "middle", "no intervals: no file went over several streams")
	}
	// Each file's copy is a line of its own: several may overlap in time.
	var files []string
	byFile := map[string][]Interval{}
	for _, iv := range t.Intervals {
		if _, ok := byFile[iv.File]; !ok {
			files = append(files, iv.File)
		}
		byFile[iv.File] = append(byFile[iv.File], iv)
	}
	for _, f := range files {
		ivs := byFile[f]
		var good, streams, conns [][2]float64
		for i, iv := range ivs {
			x := xOf(iv.Time.Seconds())
			good = append(good, [2]float64{x, gOf(iv.Goodput / 1e6)})
			// A plan holds from its decision to the next one.
			if i > 0 {
				streams = append(streams, [2]float64{x, nOf(ivs[i-1].Streams)})
				conns = append(conns, [2]float64{x, nOf(ivs[i-1].Conns)})
			}
			streams = append(streams, [2]float64{x, nOf(iv.Streams)})
			conns = append(conns, [2]float64{x, nOf(iv.Conns)})
		}
		d.Polyline(streams, streamsColor, stepWidth, "")
		d.Polyline(conns, connsColor, stepWidth, connsDash)
		d.Polyline(good, goodputColor, goodputWidth, "")
	}
	drawStrips(d, t, conns, xOf, y1+stripTop)
	for _, iv := range t.Intervals {
		fill := goodputColor
		if iv.AppLimited {
			fill = starvedColor
		}
		d.Circle(xOf(iv.Time.Seconds()), gOf(iv.Goodput/1e6), pointRadius, fill, describe(iv))
	}
	for _, iv := range t.Intervals {
		if iv.Decision == "" {
			continue
		}
		x := xOf(iv.Time.Seconds())
		d.Line(x, y0, x, y1, decisionColor, 0.7, decisionLineDash)
		d.Polygon([][2]float64{{x - markerHalf, y0 - 2*markerHalf}, {x + markerHalf, y0 - 2*markerHalf}, {x, y0}},
			decisionColor, fmt.Sprintf("%.2fs %s: %d streams on %d connections: %s",
				iv.Time.Seconds(), iv.File, iv.Streams, iv.Conns, iv.Decision))
	}
	_, err := d.WriteTo(w)
	return err
}

// connIDs are the connections the trace tells of, in order, at most
// maxStrips of them.
func connIDs(t *Trace) []int {
	seen := map[int]bool{}
	var ids []int
	for _, iv := range t.Intervals {
		for _, c := range iv.TCP {
			if !seen[c.Conn] {
				seen[c.Conn] = true
				ids = append(ids, c.Conn)
			}
		}
	}
	slices.Sort(ids)
	return ids[:min(len(ids), maxStrips)]
}

// drawStrips draws, from y down, a row per connection of conns: each
// interval a rectangle from the file's previous row to its own, in its
// verdict's color, and under them the colors' legend.
func drawStrips(d *svg.Doc, t *Trace, conns []int, xOf func(float64) float64, y float64) {
	if len(conns) == 0 {
		return
	}
	row := map[int]float64{}
	for i, c := range conns {
		row[c] = y + float64(i)*(stripRow+stripGap)
		d.Text(left-6, row[c]+stripRow-1, "end", fmt.Sprintf("conn %d", c))
	}
	color := map[string]string{}
	for _, lc := range limitColors {
		color[lc.verdict] = lc.color
	}
	prev := map[string]time.Duration{} // each file's previous row
	for _, iv := range t.Intervals {
		from, ok := prev[iv.File]
		prev[iv.File] = iv.Time
		if !ok {
			continue
		}
		for _, c := range iv.TCP {
			ry, drawn := row[c.Conn]
			if !drawn || c.LimitedBy == "" {
				continue
			}
			fill := color[c.LimitedBy]
			if fill == "" {
				fill = "#000" // a verdict of a later hpncp
			}
			d.Rect(xOf(from.Seconds()), ry, xOf(iv.Time.Seconds())-xOf(from.Seconds()), stripRow, fill,
				fmt.Sprintf("conn %d, %.2fs to %.2fs: %s", c.Conn, from.Seconds(), iv.Time.Seconds(), c.LimitedBy))
		}
	}
	ly := y + float64(len(conns))*(stripRow+stripGap) + 16
	x := left
	d.Text(x, ly, "start", "limited by:")
	x += 75
	for _, lc := range limitColors {
		d.Rect(x, ly-9, 12, 10, lc.color, "")
		d.Text(x+16, ly, "start", lc.verdict)
		x += 70
	}
	// A swatch, not a circle: the chart has exactly one point per interval.
	d.Line(x+3, ly-4, x+9, ly-4, starvedColor, 2*pointRadius, "")
	d.Text(x+16, ly, "start", "pale point: streams starved, skipped by the controller")
}

// legend draws the key above the plot area, from x.
func legend(d *svg.Doc, x float64) {
	items := []struct{ label, color, dash string }{
		{"goodput (MB/s)", goodputColor, ""},
		{"streams", streamsColor, ""},
		{"connections", connsColor, connsDash},
	}
	for _, it := range items {
		d.Line(x, legendY-4, x+legendSwatch, legendY-4, it.color, 2.5, it.dash)
		d.Text(x+legendSwatch+5, legendY, "start", it.label)
		x += legendItemWidth
	}
	d.Polygon([][2]float64{{x, legendY - 9}, {x + 2*markerHalf, legendY - 9}, {x + markerHalf, legendY}}, decisionColor, "")
	d.Text(x+legendSwatch+5, legendY, "start", "decision (hover for why)")
}

// describe is a point's tooltip.
func describe(iv Interval) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%.2fs %s: %.1f MB/s, %d streams on %d connections, rtt %v",
		iv.Time.Seconds(), iv.File, iv.Goodput/1e6, iv.Streams, iv.Conns, iv.RTT.Round(10*time.Microsecond))
	if iv.AppLimited {
		b.WriteString(", streams starved (skipped by the controller)")
	}
	if iv.Errors > 0 {
		fmt.Fprintf(&b, ", %d streams lost", iv.Errors)
	}
	for _, c := range iv.TCP {
		fmt.Fprintf(&b, "; conn %d: %.1f MB moved, srtt %v (min %v), cwnd %d, %d retransmits, delivery rate %.1f MB/s",
			c.Conn, float64(c.Bytes)/1e6, c.SRTT.Round(10*time.Microsecond), c.MinRTT.Round(10*time.Microsecond), c.Cwnd, c.Retrans, c.DeliveryRate/1e6)
		if c.LimitedBy != "" {
			fmt.Fprintf(&b, ", limited by %s", c.LimitedBy)
		}
	}
	return b.String()
}
