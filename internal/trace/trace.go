// Package trace writes and reads the --trace file of a copy: a CSV with
// one row per connection per window-controller interval, so that what
// the controller decided can be read beside what limited each
// connection; and it draws the file as an SVG chart (Plot).
//
// The columns (Columns):
//
//	interval       the controller interval's number in the run, from 0
//	time_s         seconds since the run started, when the interval ended
//	file           the source path of the file being copied
//	goodput        bytes per second the interval completed
//	rtt_ms         the controller's round-trip estimate
//	streams        the plan's streams for the next interval
//	conns          the plan's connections for the next interval
//	decision       the controller's reason when it decided: the plan
//	               changed, or its reason did (a probe kept, a plateau
//	               settled on); empty when it went on as before
//	app_limited    1 when the pipeline could not keep every stream busy
//	               (the controller then skips the interval), else 0
//	errors         streams that failed for transport reasons
//	conn           the connection's number in the run, empty when no
//	               connection's TCP state could be read
//	srtt_ms        its smoothed round trip
//	min_rtt_ms     its smallest round trip
//	cwnd           its congestion window, in segments
//	retrans        segments it retransmitted in the interval
//	delivery_rate  the kernel's delivery-rate estimate, bytes per second
//	bytes          bytes the connection moved in the interval (acknowledged
//	               by the peer, or received)
//	limited_by     rwnd, sndbuf, loss, cwnd, app, recv or empty (sshconn.LimitedBy)
//	cpu_s          CPU seconds (user and system) hpncp spent in the interval,
//	               empty when unknown
//	spurious       of the connection's retransmits, those the peer had
//	               already (DSACK): not loss
//	lost           segments the kernel presumed lost at the interval's end
//
// The last three came later; Parse reads a trace without them as zero.
// An interval spans as many rows as connections were read (one with empty
// connection columns when none were); its first columns repeat on each.
// Each file's first row (interval with goodput 0) is the controller's
// first plan. One row per connection, rather than columns per
// connection, lets the file be written as the run goes, before the
// number of connections is known: every interval is written out at once
// in one write, so that a run killed midway leaves every interval before
// the kill readable.
package trace

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hpncp/hpncp/window"
)

// Columns is the header row.
var Columns = []string{"interval", "time_s", "file", "goodput", "rtt_ms", "streams", "conns", "decision",
	"app_limited", "errors", "conn", "srtt_ms", "min_rtt_ms", "cwnd", "retrans", "delivery_rate", "bytes", "limited_by",
	"cpu_s", "spurious", "lost"}

// later are the columns of Columns a trace of an earlier hpncp lacks.
var later = map[string]bool{"cpu_s": true, "spurious": true, "lost": true}

// Writer appends intervals to a trace file. It is safe for concurrent
// use: several files' copies may trace at once.
type Writer struct {
	mu    sync.Mutex
	f     *os.File
	start time.Time
	next  int               // the next interval's number
	why   map[string]string // each file's last reason
	err   error             // the first write error, returned by Close
}

// Create starts a trace file at path, replacing any there, with its
// header row. Times in it count from now.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create trace %s: %w", path, cause(err))
	}
	w := &Writer{f: f, start: time.Now(), why: map[string]string{}}
	var b bytes.Buffer
	c := csv.NewWriter(&b)
	_ = c.Write(Columns) // a bytes.Buffer does not fail
	c.Flush()
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return nil, fmt.Errorf("write trace %s: %w", path, cause(err))
	}
	return w, nil
}

// Interval records one controller step of the copy of file: the sample
// it measured and the plan decided on it; changed says the plan's
// streams or connections changed. A decision is recorded when they did
// or the plan's reason changed: holding on a plateau changes no number. A write error is kept for Close: a
// trace that cannot be written does not stop the copy.
func (w *Writer) Interval(file string, s window.Sample, p window.Plan, changed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	goodput := 0.0
	if s.Elapsed > 0 {
		goodput = float64(s.Bytes) / s.Elapsed.Seconds()
	}
	decision := ""
	if last, ok := w.why[file]; changed || !ok || p.Reason != last {
		decision = p.Reason
	}
	w.why[file] = p.Reason
	app := "0"
	if s.AppLimited {
		app = "1"
	}
	head := []string{strconv.Itoa(w.next), ffmt(time.Since(w.start).Seconds(), 3), file, ffmt(goodput, 0),
		ms(p.RTT), strconv.Itoa(p.Streams), strconv.Itoa(p.Conns), decision, app, strconv.Itoa(s.Errors)}
	w.next++
	cpu := ""
	if s.CPU > 0 {
		cpu = ffmt(s.CPU.Seconds(), 3)
	}
	var b bytes.Buffer
	c := csv.NewWriter(&b)
	if len(s.Conns) == 0 {
		_ = c.Write(append(head, "", "", "", "", "", "", "", "", cpu, "", ""))
	}
	for _, cs := range s.Conns {
		_ = c.Write(append(head[:len(head):len(head)], strconv.Itoa(cs.Conn), ms(cs.SRTT), ms(cs.MinRTT),
			strconv.Itoa(cs.Cwnd), strconv.FormatInt(cs.Retrans, 10), ffmt(cs.DeliveryRate, 0), strconv.FormatInt(cs.Bytes, 10), cs.LimitedBy,
			cpu, strconv.FormatInt(cs.Spurious, 10), strconv.Itoa(cs.Lost)))
	}
	c.Flush()
	if _, err := w.f.Write(b.Bytes()); err != nil {
		w.err = fmt.Errorf("write trace %s: %w", w.f.Name(), cause(err))
	}
}

// Intervals is how many intervals were written.
func (w *Writer) Intervals() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Close ends the file and returns the first error writing it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.f.Close()
	if w.err != nil {
		return w.err
	}
	if err != nil {
		return fmt.Errorf("close trace %s: %w", w.f.Name(), cause(err))
	}
	return nil
}

func ms(d time.Duration) string { return ffmt(float64(d)/float64(time.Millisecond), 3) }

func ffmt(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// cause is err without the *fs.PathError around it, whose operation and
// path the messages here say already.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
