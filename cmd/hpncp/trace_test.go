package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/hpncp/hpncp/internal/trace"
)

// tracecheck CSV SVG MIN reads the trace CSV back, wants at least MIN
// intervals in it, every one after a file's first plan with its
// connections' state, and the chart SVG well-formed XML with exactly one
// point (circle) per interval.
func cmdTracecheck(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: tracecheck trace.csv chart.svg min-intervals")
	}
	least, err := strconv.Atoi(args[2])
	ts.Check(err)
	f, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	tr, err := trace.Parse(f)
	ts.Check(err)
	if len(tr.Intervals) < least {
		ts.Fatalf("%s: %d intervals, want at least %d", args[0], len(tr.Intervals), least)
	}
	first := map[string]bool{}
	for _, iv := range tr.Intervals {
		if !first[iv.File] {
			first[iv.File] = true
			if iv.Goodput != 0 || iv.Decision == "" {
				ts.Fatalf("%s: %s's first row %+v: want the first plan, with its reason", args[0], iv.File, iv)
			}
			continue
		}
		if len(iv.TCP) == 0 {
			ts.Fatalf("%s: interval %d has no connection's TCP state", args[0], iv.N)
		}
		for _, c := range iv.TCP {
			if c.SRTT <= 0 || c.MinRTT <= 0 || c.Cwnd <= 0 {
				ts.Fatalf("%s: interval %d: connection %+v: want its srtt, min rtt and cwnd", args[0], iv.N, c)
			}
		}
	}
	doc, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	circles := 0
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			ts.Fatalf("%s is not well-formed XML: %v", args[1], err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	if circles != len(tr.Intervals) {
		ts.Fatalf("%s: %d points for the %d intervals of %s", args[1], circles, len(tr.Intervals), args[0])
	}
}

// svgcount FILE ELEMENT N decodes FILE as XML, failing unless it is
// well-formed, and wants exactly N elements named ELEMENT in it.
func cmdSvgcount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: svgcount file.svg element count")
	}
	want, err := strconv.Atoi(args[2])
	ts.Check(err)
	doc, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	n := 0
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			ts.Fatalf("%s is not well-formed XML: %v", args[0], err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == args[1] {
			n++
		}
	}
	if n != want {
		ts.Fatalf("%s: %d <%s> elements, want %d", args[0], n, args[1], want)
	}
}
