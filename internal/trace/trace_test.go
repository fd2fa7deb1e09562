package trace

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hpncp/hpncp/window"
)

// hostile is a file name with everything CSV and SVG must escape.
const hostile = "a,b \"q\"\n<script>alert(1)</script>&amp;.bin"

// sampleTrace writes a trace of two files' copies and returns its path.
func sampleTrace(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.csv")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	start := window.Plan{Streams: 4, Conns: 1, RTT: 100 * time.Millisecond, Reason: "start: 1 Gbit/s guessed"}
	w.Interval("big.iso", window.Sample{RTT: 100 * time.Millisecond}, start, true)
	conns := []window.ConnSample{
		{Conn: 0, SRTT: 101500 * time.Microsecond, MinRTT: 100 * time.Millisecond, Cwnd: 900, Retrans: 2, Spurious: 1, Lost: 3, DeliveryRate: 41.5e6, Bytes: 17e6, LimitedBy: "loss"},
		{Conn: 1, SRTT: 120 * time.Millisecond, MinRTT: 100 * time.Millisecond, Cwnd: 1200, DeliveryRate: 60e6, Bytes: 23e6, LimitedBy: "rwnd"},
	}
	w.Interval("big.iso", window.Sample{Elapsed: 400 * time.Millisecond, Bytes: 40e6, Conns: conns, AppLimited: true, Errors: 1, CPU: 250 * time.Millisecond},
		window.Plan{Streams: 8, Conns: 2, RTT: 110 * time.Millisecond, Reason: "probe: more channels"}, true)
	w.Interval("big.iso", window.Sample{Elapsed: 400 * time.Millisecond, Bytes: 44e6, Conns: conns[:1]},
		window.Plan{Streams: 8, Conns: 2, RTT: 110 * time.Millisecond, Reason: "probe: more channels"}, false)
	// A plateau: the same plan, held for a new reason.
	w.Interval("big.iso", window.Sample{Elapsed: 400 * time.Millisecond, Bytes: 44e6, Conns: conns[:1]},
		window.Plan{Streams: 8, Conns: 2, RTT: 110 * time.Millisecond, Reason: "plateau"}, false)
	w.Interval(hostile, window.Sample{Elapsed: 250 * time.Millisecond, Bytes: 1e6},
		window.Plan{Streams: 1, Conns: 1, Reason: "fixed"}, true)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHeaderAndRows(t *testing.T) {
	b, err := os.ReadFile(sampleTrace(t))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := "interval,time_s,file,goodput,rtt_ms,streams,conns,decision,app_limited,errors,conn,srtt_ms,min_rtt_ms,cwnd,retrans,delivery_rate,bytes,limited_by,cpu_s,spurious,lost"
	if got := strings.Join(recs[0], ","); got != want {
		t.Errorf("header %s\nwant   %s", got, want)
	}
	// The first plan, two connections, one connection twice, one file
	// without connection state.
	if len(recs) != 1+1+2+1+1+1 {
		t.Fatalf("%d rows, want 7:\n%s", len(recs), b)
	}
	row := recs[2]
	got := append([]string{row[0]}, row[2:]...)
	wantRow := []string{"1", "big.iso", "100000000", "110.000", "8", "2", "probe: more channels", "1", "1", "0", "101.500", "100.000", "900", "2", "41500000", "17000000", "loss", "0.250", "1", "3"}
	if !reflect.DeepEqual(got, wantRow) {
		t.Errorf("first interval's first row %q\nwant %q", got, wantRow)
	}
	if recs[4][7] != "" || recs[4][8] != "0" || recs[4][9] != "0" {
		t.Errorf("a held plan's decision %q, want empty", recs[4][7])
	}
	if recs[5][7] != "plateau" {
		t.Errorf("the same plan for a new reason: decision %q, want the reason", recs[5][7])
	}
	if recs[6][2] != hostile || recs[6][10] != "" || recs[6][7] != "fixed" {
		t.Errorf("last row %q: want the hostile name intact, its first decision and no connection", recs[6])
	}
}

// parseFile parses the trace at path, failing the test on an error.
func parseFile(t *testing.T, path string) *Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestParseRoundTrip(t *testing.T) {
	tr := parseFile(t, sampleTrace(t))
	if len(tr.Intervals) != 5 {
		t.Fatalf("%d intervals, want 5: %+v", len(tr.Intervals), tr.Intervals)
	}
	iv := tr.Intervals[1]
	iv.Time = 0 // the clock's
	want := Interval{N: 1, File: "big.iso", Goodput: 100e6, RTT: 110 * time.Millisecond, Streams: 8, Conns: 2,
		Decision: "probe: more channels", AppLimited: true, Errors: 1, CPU: 250 * time.Millisecond, TCP: []Conn{
			{Conn: 0, SRTT: 101500 * time.Microsecond, MinRTT: 100 * time.Millisecond, Cwnd: 900, Retrans: 2, Spurious: 1, Lost: 3, DeliveryRate: 41.5e6, Bytes: 17e6, LimitedBy: "loss"},
			{Conn: 1, SRTT: 120 * time.Millisecond, MinRTT: 100 * time.Millisecond, Cwnd: 1200, DeliveryRate: 60e6, Bytes: 23e6, LimitedBy: "rwnd"},
		}}
	if !reflect.DeepEqual(iv, want) {
		t.Errorf("interval 1 read back as\n%+v\nwant\n%+v", iv, want)
	}
	if got := tr.Intervals[0]; got.Decision != "start: 1 Gbit/s guessed" || got.Goodput != 0 || len(got.TCP) != 0 {
		t.Errorf("first plan read back as %+v", got)
	}
	if got := tr.Intervals[4]; got.File != hostile || got.TCP != nil || got.Goodput != 4e6 {
		t.Errorf("last interval read back as %+v", got)
	}
	for i := 1; i < len(tr.Intervals); i++ {
		if tr.Intervals[i].Time < tr.Intervals[i-1].Time {
			t.Errorf("interval %d at %v, before interval %d at %v", i, tr.Intervals[i].Time, i-1, tr.Intervals[i-1].Time)
		}
	}
}

// TestParseEarlierTrace: a trace written before the CPU and loss
// columns reads, with those as zero.
func TestParseEarlierTrace(t *testing.T) {
	tr := parseFile(t, "testdata/two-files.csv")
	if len(tr.Intervals) < 2 || tr.Intervals[1].CPU != 0 || len(tr.Intervals[1].TCP) == 0 || tr.Intervals[1].TCP[0].Spurious != 0 {
		t.Errorf("an earlier trace read as %+v", tr.Intervals)
	}
}

// TestParseKilledRun cuts the trace at every byte, as a run killed while
// writing would: every cut reads as a prefix of the whole.
func TestParseKilledRun(t *testing.T) {
	b, err := os.ReadFile(sampleTrace(t))
	if err != nil {
		t.Fatal(err)
	}
	full, err := Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	header := bytes.IndexByte(b, '\n') + 1
	for cut := header; cut <= len(b); cut++ {
		tr, err := Parse(bytes.NewReader(b[:cut]))
		if err != nil {
			t.Fatalf("cut at byte %d of %d: %v", cut, len(b), err)
		}
		n := len(tr.Intervals)
		if n > len(full.Intervals) {
			t.Fatalf("cut at byte %d: %d intervals, more than the whole's %d", cut, n, len(full.Intervals))
		}
		for i, iv := range tr.Intervals {
			w := full.Intervals[i]
			if i == n-1 && len(iv.TCP) < len(w.TCP) {
				w.TCP = w.TCP[:len(iv.TCP)] // the cut interval's first rows
			}
			if !reflect.DeepEqual(iv, w) {
				t.Fatalf("cut at byte %d: interval %d read as %+v, want %+v", cut, i, iv, w)
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	head := strings.Join(Columns, ",") + "\n"
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no header"},
		{"not a trace", "a,b,c\n1,2,3\n", "no interval column"},
		{"negative goodput", head + "0,1.0,f,-5,1,1,1,,0,0,,,,,,,,,,,\n", `line 2: goodput "-5"`},
		{"not a number", head + "0,1.0,f,5,1,x,1,,0,0,,,,,,,,,,,\n", `line 2: streams "x"`},
		{"interval back", head + "1,1.0,f,5,1,1,1,,0,0,,,,,,,,,,,\n0,1.0,f,5,1,1,1,,0,0,,,,,,,,,,,\n", "line 3: interval 0 after interval 1"},
		{"repeated row", head + "0,1.0,f,5,1,1,1,,0,0,,,,,,,,,,,\n0,1.0,f,5,1,1,1,,0,0,,,,,,,,,,,\n", "line 3: interval 0: a second row"},
		{"short row", head + "0,1.0,f\n0,1,f,5,1,1,1,,0,0,,,,,,,,,,,\n", "line 2"},
		{"app_limited not 0 or 1", head + "0,1.0,f,5,1,1,1,,2,0,,,,,,,,,,,\n", `app_limited "2"`},
		{"negative cpu_s", head + "0,1.0,f,5,1,1,1,,0,0,,,,,,,,,-1,,\n", `cpu_s "-1"`},
		{"infinite", head + "0,1.0,f,+Inf,1,1,1,,0,0,,,,,,,,,,,\n", "goodput"},
	} {
		_, err := Parse(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Parse: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// elements decodes the whole of doc as XML, failing on any error, and
// counts its elements by name; texts are its character data.
func elements(t testing.TB, doc []byte) (map[string]int, []string) {
	t.Helper()
	count := map[string]int{}
	var texts []string
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return count, texts
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			count[tok.Name.Local]++
		case xml.CharData:
			texts = append(texts, string(tok))
		}
	}
}

func TestPlot(t *testing.T) {
	f, err := os.Open(sampleTrace(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Plot(&b, tr, `trace "<x>".csv`); err != nil {
		t.Fatal(err)
	}
	count, texts := elements(t, b.Bytes())
	if count["svg"] != 1 || count["script"] != 0 || count["x"] != 0 {
		t.Errorf("elements %v: want one svg and nothing made from the names", count)
	}
	if count["circle"] != len(tr.Intervals) {
		t.Errorf("%d points for %d intervals, want one each", count["circle"], len(tr.Intervals))
	}
	// Four decisions, and the legend's marker.
	if count["polygon"] != 4+1 {
		t.Errorf("%d decision markers, want 4 and the legend's", count["polygon"]-1)
	}
	// The background, a strip piece per connection of each interval but
	// a file's first plan (2, 1 and 1), and the six verdicts' legend.
	if count["rect"] != 1+4+6 {
		t.Errorf("%d rectangles, want the background, 4 strip pieces and 6 in the legend", count["rect"])
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"conn 1, ", "s: rwnd", "conn 0", hostile, `trace "<x>".csv`, "probe: more channels", "limited by rwnd", "streams starved (skipped by the controller)", "time since the run started (s)", "goodput (MB/s)", "streams, connections"} {
		if !strings.Contains(all, want) {
			t.Errorf("the chart's text lacks %q", want)
		}
	}
}

func TestPlotEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := Plot(&b, &Trace{}, "empty"); err != nil {
		t.Fatal(err)
	}
	count, texts := elements(t, b.Bytes())
	if count["circle"] != 0 || !strings.Contains(strings.Join(texts, " "), "no intervals") {
		t.Errorf("an empty trace: %v, %q", count, texts)
	}
}

func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.csv")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := Parse(bytes.NewReader(in))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := Plot(&b, tr, "fuzz"); err != nil {
			t.Fatal(err)
		}
		count, _ := elements(t, b.Bytes())
		if count["circle"] != len(tr.Intervals) {
			t.Fatalf("%d points for %d intervals", count["circle"], len(tr.Intervals))
		}
	})
}
