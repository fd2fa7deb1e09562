// Package svg writes the small SVG charts hpncp draws itself (hpncp trace
// plot, hpncp bench --svg): a document of shapes and text, every text and
// title escaped, since names in them (files, hosts) come from outside.
package svg

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// Doc is an SVG document being drawn, width × height user units, origin
// top left.
type Doc struct {
	b    strings.Builder
	W, H float64
}

// New starts a document of w × h with a white background.
func New(w, h float64) *Doc {
	d := &Doc{W: w, H: h}
	fmt.Fprintf(&d.b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="12">`+"\n",
		num(w), num(h), num(w), num(h))
	d.Rect(0, 0, w, h, "#fff", "")
	return d
}

// Escape returns s as XML character data or attribute text. Characters
// XML cannot hold at all (most control characters) become U+FFFD.
func Escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// num formats a coordinate: two decimals at most, no exponent.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" || s == "" {
		return "0"
	}
	return s
}

// title is the tooltip child of a shape, or "" for none.
func title(t string) string {
	if t == "" {
		return ""
	}
	return "<title>" + Escape(t) + "</title>"
}

// shape writes an element with attrs and, when t is not empty, a title.
func (d *Doc) shape(name, attrs, t string) {
	if t == "" {
		fmt.Fprintf(&d.b, "<%s %s/>\n", name, attrs)
		return
	}
	fmt.Fprintf(&d.b, "<%s %s>%s</%s>\n", name, attrs, title(t), name)
}

// Rect draws a filled rectangle.
func (d *Doc) Rect(x, y, w, h float64, fill, tooltip string) {
	d.shape("rect", fmt.Sprintf(`x="%s" y="%s" width="%s" height="%s" fill="%s"`,
		num(x), num(y), num(max(w, 0)), num(max(h, 0)), Escape(fill)), tooltip)
}

// Circle draws a filled circle.
func (d *Doc) Circle(x, y, r float64, fill, tooltip string) {
	d.shape("circle", fmt.Sprintf(`cx="%s" cy="%s" r="%s" fill="%s"`, num(x), num(y), num(r), Escape(fill)), tooltip)
}

// Line draws a straight line; dash, when not empty, is its stroke-dasharray.
func (d *Doc) Line(x1, y1, x2, y2 float64, stroke string, width float64, dash string) {
	d.shape("line", fmt.Sprintf(`x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s`,
		num(x1), num(y1), num(x2), num(y2), Escape(stroke), num(width), dashAttr(dash)), "")
}

// Polyline draws a line through points, each an x and a y.
func (d *Doc) Polyline(points [][2]float64, stroke string, width float64, dash string) {
	if len(points) == 0 {
		return
	}
	var p strings.Builder
	for i, pt := range points {
		if i > 0 {
			p.WriteByte(' ')
		}
		p.WriteString(num(pt[0]) + "," + num(pt[1]))
	}
	d.shape("polyline", fmt.Sprintf(`points="%s" fill="none" stroke="%s" stroke-width="%s"%s`,
		p.String(), Escape(stroke), num(width), dashAttr(dash)), "")
}

// Polygon draws a filled polygon through points (a marker).
func (d *Doc) Polygon(points [][2]float64, fill, tooltip string) {
	var p strings.Builder
	for i, pt := range points {
		if i > 0 {
			p.WriteByte(' ')
		}
		p.WriteString(num(pt[0]) + "," + num(pt[1]))
	}
	d.shape("polygon", fmt.Sprintf(`points="%s" fill="%s"`, p.String(), Escape(fill)), tooltip)
}

// Text writes s at x, y; anchor is "start", "middle" or "end".
func (d *Doc) Text(x, y float64, anchor, s string) {
	fmt.Fprintf(&d.b, `<text x="%s" y="%s" text-anchor="%s">%s</text>`+"\n", num(x), num(y), Escape(anchor), Escape(s))
}

// TextRotated writes s at x, y turned a quarter counterclockwise: the
// label of a vertical axis.
func (d *Doc) TextRotated(x, y float64, s string) {
	fmt.Fprintf(&d.b, `<text x="%s" y="%s" text-anchor="middle" transform="rotate(-90 %s %s)">%s</text>`+"\n",
		num(x), num(y), num(x), num(y), Escape(s))
}

func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return ` stroke-dasharray="` + Escape(dash) + `"`
}

// WriteTo ends the document and writes it to w.
func (d *Doc) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, d.b.String()+"</svg>\n")
	return int64(n), err
}

// Ticks returns about n round values (1, 2 or 5 times a power of ten
// apart) from 0 up to at least hi, for an axis from 0 to hi; the last is
// the axis's top. An axis too small to tell from 0 (or not a number)
// goes from 0 to 1.
func Ticks(hi float64, n int) []float64 {
	if !(hi >= 1e-9) || math.IsInf(hi, 0) {
		hi = 1
	}
	if n < 1 {
		n = 1
	}
	raw := hi / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow * 10
	for _, m := range []float64{1, 2, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	var ts []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		ts = append(ts, v)
		// n steps of at least hi/n reach hi; the bound guards rounding.
		if v >= hi || i > 2*n+2 {
			return ts
		}
	}
}

// Label formats a tick value without trailing zeros.
func Label(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
