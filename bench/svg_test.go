package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestWriteSVG(t *testing.T) {
	row := func(name string, d Direction, median float64) Row {
		return Row{Config: Config{Name: name}, Direction: d, MBps: []float64{median / 2, median, median * 1.1},
			MBpsSummary: Summary{Min: median / 2, Median: median, Max: median * 1.1}}
	}
	const host = `nas<script>&"`
	rep := &Report{Host: host, Size: 64 << 20, Runs: 3, Rows: []Row{
		row("hpn", Upload, 100), row("hpnd", Upload, 25), row("hpn", Download, 50),
	}}
	var b bytes.Buffer
	if err := WriteSVG(&b, rep); err != nil {
		t.Fatal(err)
	}
	widths := map[string]float64{}
	var texts []string
	elems := map[string]int{}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	var bar string // the tooltip of the rect being read
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			elems[tok.Name.Local]++
			if tok.Name.Local == "rect" {
				for _, a := range tok.Attr {
					if a.Name.Local == "width" {
						bar = a.Value
					}
				}
			}
		case xml.CharData:
			s := string(tok)
			texts = append(texts, s)
			if name, _, ok := strings.Cut(s, ":"); ok && bar != "" && strings.Contains(s, "median") {
				widths[name], _ = strconv.ParseFloat(bar, 64)
				bar = ""
			}
		}
	}
	if elems["script"] != 0 || elems["rect"] != 1+3 {
		t.Errorf("elements %v: want the background and 3 bars, nothing made from the host name", elems)
	}
	if up, down, d := widths["hpn upload"], widths["hpnd upload"], widths["hpn download"]; up == 0 || math.Abs(up-4*down) > 0.05 || math.Abs(up-2*d) > 0.05 {
		t.Errorf("bar widths hpn up %v, hpnd up %v, hpn down %v: want them as 100, 25, 50 MB/s", up, down, d)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"hpncp bench " + host + ":", "hpn upload", "hpnd upload", "hpn download", "100.0 MB/s", "25.0 MB/s"} {
		if !strings.Contains(all, want) {
			t.Errorf("the chart's text lacks %q", want)
		}
	}
}
