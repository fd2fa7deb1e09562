package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBarProgressShowsFileBytesAndRate(t *testing.T) {
	var out bytes.Buffer
	p := newBarProgress(&out)
	p.StartFile("big.iso", 3<<20)
	for range 3 {
		p.Add(1 << 20)
	}
	p.EndFile()
	s := out.String()
	for _, want := range []string{"big.iso", "100%", "3.0/3.0 MiB", "B/s"} {
		if !strings.Contains(s, want) {
			t.Errorf("progress output lacks %q:\n%q", want, s)
		}
	}
	if !strings.HasSuffix(s, "\n") {
		t.Errorf("a finished bar should end its line: %q", s)
	}
}

func TestBarProgressFailedFileEndsLine(t *testing.T) {
	var out bytes.Buffer
	p := newBarProgress(&out)
	p.StartFile("half", 100)
	p.Add(50)
	p.EndFile()
	if s := out.String(); !strings.HasSuffix(s, "\n") || strings.Contains(s, "100%") {
		t.Errorf("a bar stopped halfway should stay as it was, on its own line: %q", s)
	}
}

func TestBarProgressCountsFilesInFlightTogether(t *testing.T) {
	var out bytes.Buffer
	p := newBarProgress(&out)
	p.StartFile("a", 1<<20)
	p.StartFile("b", 1<<20)
	p.Add(1 << 20)
	p.EndFile()
	if s := out.String(); strings.HasSuffix(s, "\n") {
		t.Errorf("the bar ended its line with a file still in flight: %q", s)
	}
	p.Add(1 << 20)
	p.EndFile()
	s := out.String()
	for _, want := range []string{"2 files", "100%", "2.0/2.0 MiB"} {
		if !strings.Contains(s, want) {
			t.Errorf("progress output lacks %q:\n%q", want, s)
		}
	}
	if !strings.HasSuffix(s, "\n") {
		t.Errorf("a finished bar should end its line: %q", s)
	}
}
