package trace

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Trace is a trace file read back.
type Trace struct {
	Intervals []Interval
}

// Interval is one controller step of one file's copy.
type Interval struct {
	N        int           // the interval's number in the run
	Time     time.Duration // since the run started, at the interval's end
	File     string
	Goodput  float64 // bytes per second
	RTT      time.Duration
	Streams  int
	Conns    int
	Decision string // the controller's reason where it decided; empty where it went on
	// AppLimited: the pipeline could not keep every stream busy.
	AppLimited bool
	Errors     int           // streams lost to transport errors
	CPU        time.Duration // hpncp's CPU time in the interval; 0 when unknown
	TCP        []Conn        // the connections read, none where none could be
}

// Conn is one connection's row of an interval.
type Conn struct {
	Conn         int
	SRTT, MinRTT time.Duration
	Cwnd         int
	Retrans      int64
	DeliveryRate float64 // bytes per second
	Bytes        int64   // moved in the interval
	LimitedBy    string
	Spurious     int64 // of Retrans, those the peer had already (DSACK)
	Lost         int   // segments presumed lost at the interval's end
}

// MaxSize is the largest trace Parse reads: an hour's copy at four
// intervals a second over 32 connections is about 50 MB.
const MaxSize = 256 << 20

// maxCount bounds the counts in a trace (streams, connections, cwnd),
// far above anything hpncp runs, so that a chart's axes stay finite.
const maxCount = 1 << 30

// Parse reads a trace written by Writer. A last row cut short (without
// its newline, or inside its quotes) is what a run killed while writing
// leaves, and is left out.
func Parse(r io.Reader) (*Trace, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("larger than %d MiB: not a trace hpncp writes", MaxSize>>20)
	}
	complete := len(data) == 0 || data[len(data)-1] == '\n'
	cr := csv.NewReader(bytes.NewReader(data))
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty: no header row")
	}
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, name := range header {
		col[name] = i
	}
	for _, name := range Columns {
		if _, ok := col[name]; !ok && !later[name] {
			return nil, fmt.Errorf("line 1: no %s column: not a trace written by hpncp --trace", name)
		}
	}
	type row struct {
		rec  []string
		line int
	}
	var rows []row
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A run killed while writing cuts its last row anywhere:
			// inside a quoted name too, maybe just after a newline in it.
			if _, next := cr.Read(); errors.Is(next, io.EOF) {
				complete = true
				break
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		rows = append(rows, row{rec, line})
	}
	if !complete && len(rows) > 0 {
		rows = rows[:len(rows)-1]
	}
	t := &Trace{}
	for _, r := range rows {
		if err := t.add(r.rec, col); err != nil {
			return nil, fmt.Errorf("line %d: %w", r.line, err)
		}
	}
	return t, nil
}

// add adds one row to t.
func (t *Trace) add(rec []string, col map[string]int) error {
	f := fields{rec: rec, col: col}
	iv := Interval{
		N:        f.count("interval"),
		Time:     f.duration("time_s", time.Second),
		File:     rec[col["file"]],
		Goodput:  f.float("goodput"),
		RTT:      f.duration("rtt_ms", time.Millisecond),
		Streams:  f.count("streams"),
		Conns:    f.count("conns"),
		Decision: rec[col["decision"]],
		Errors:   f.count("errors"),
	}
	if f.has("cpu_s") {
		iv.CPU = f.duration("cpu_s", time.Second)
	}
	switch v := rec[col["app_limited"]]; v {
	case "0":
	case "1":
		iv.AppLimited = true
	default:
		f.fail("app_limited", v, "0 or 1")
	}
	var c *Conn
	if rec[col["conn"]] != "" {
		c = &Conn{
			Conn:         f.count("conn"),
			SRTT:         f.duration("srtt_ms", time.Millisecond),
			MinRTT:       f.duration("min_rtt_ms", time.Millisecond),
			Cwnd:         f.count("cwnd"),
			Retrans:      int64(f.count("retrans")),
			DeliveryRate: f.float("delivery_rate"),
			Bytes:        int64(f.float("bytes")),
			LimitedBy:    rec[col["limited_by"]],
		}
		if f.has("spurious") {
			c.Spurious = int64(f.count("spurious"))
		}
		if f.has("lost") {
			c.Lost = f.count("lost")
		}
	}
	if f.err != nil {
		return f.err
	}
	if n := len(t.Intervals); n > 0 {
		last := &t.Intervals[n-1]
		switch {
		case iv.N == last.N:
			if c == nil || len(last.TCP) == 0 {
				return fmt.Errorf("interval %d: a second row, but not another connection's", iv.N)
			}
			last.TCP = append(last.TCP, *c)
			return nil
		case iv.N < last.N:
			return fmt.Errorf("interval %d after interval %d: the numbers go back", iv.N, last.N)
		}
	}
	if c != nil {
		iv.TCP = []Conn{*c}
	}
	t.Intervals = append(t.Intervals, iv)
	return nil
}

// fields reads a row's values by column name, keeping the first error.
type fields struct {
	rec []string
	col map[string]int
	err error
}

func (f *fields) fail(name, v, want string) {
	if f.err == nil {
		f.err = fmt.Errorf("%s %q: want %s", name, v, want)
	}
}

func (f *fields) count(name string) int {
	v := f.rec[f.col[name]]
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxCount {
		f.fail(name, v, "a whole number from 0")
		return 0
	}
	return n
}

func (f *fields) float(name string) float64 {
	v := f.rec[f.col[name]]
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) || x > 1e18 {
		f.fail(name, v, "a number from 0")
		return 0
	}
	return x
}

// has reports whether the row has a value for the column name, which a
// trace of an earlier hpncp may lack (later), or leave empty.
func (f *fields) has(name string) bool {
	i, ok := f.col[name]
	return ok && f.rec[i] != ""
}

// duration reads a number of units.
func (f *fields) duration(name string, unit time.Duration) time.Duration {
	x := f.float(name)
	if x*float64(unit) > float64(math.MaxInt64/2) {
		f.fail(name, f.rec[f.col[name]], "a shorter time")
		return 0
	}
	return time.Duration(x * float64(unit))
}
