// Package starttrace records when the steps of a copy's start happened,
// from the dial to the first byte of the file, so that -v can say how many
// round trips each step cost. At 100 ms a round trip is worth more than a
// megabyte of payload on a fast link: a small file's wall time is its
// round trips, and this is how they are seen.
//
// A Trace travels in a context (With, From); every method is safe on a
// nil *Trace, so that the code it marks need not ask whether anyone
// listens.
package starttrace

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// Steps of a start, in the order they happen; each is marked when it is
// over, so that a step's cost is the time since the step before it.
const (
	Config     = "config"      // the ssh_config is resolved (ssh -G): local work
	TCP        = "tcp"         // the TCP connection is up
	SSHVersion = "ssh-version" // the server's version line arrived
	KEX        = "kex"         // the server's key exchange reply arrived
	Auth       = "auth"        // the server accepted the user
	SFTP       = "sftp"        // the SFTP sessions are ready
	Target     = "target"      // the copy looked at its ends
	FirstByte  = "first-byte"  // the first byte of a file went out or came in
)

// Trace is the start of one run. The first mark of each step counts:
// later connections of a pool mark the same steps again, after the copy
// has begun.
type Trace struct {
	mu    sync.Mutex
	start time.Time
	rtt   time.Duration
	steps []Step
}

// Step is a step and when it was over, since the trace began.
type Step struct {
	Name string
	At   time.Duration
}

// New begins a trace now. rtt, when not 0, is the path's round-trip
// time; otherwise the TCP connect's time stands for it (SetRTT).
func New(rtt time.Duration) *Trace {
	return &Trace{start: time.Now(), rtt: rtt}
}

type key struct{}

// With returns ctx carrying t.
func With(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, key{}, t)
}

// From returns the trace ctx carries, or nil.
func From(ctx context.Context) *Trace {
	t, _ := ctx.Value(key{}).(*Trace)
	return t
}

// Mark records that step is over, unless it was marked before or the
// first byte has been.
func (t *Trace) Mark(step string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.steps {
		if s.Name == step || s.Name == FirstByte {
			return
		}
	}
	t.steps = append(t.steps, Step{Name: step, At: time.Since(t.start)})
}

// SetRTT sets the path's round-trip time unless it is known: the first
// TCP connect's duration is one SYN there and one SYN-ACK back.
func (t *Trace) SetRTT(d time.Duration) {
	if t == nil || d <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rtt == 0 {
		t.rtt = d
	}
}

// Steps returns the steps marked so far, in order.
func (t *Trace) Steps() []Step {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Step(nil), t.steps...)
}

// RoundTrips returns each step's cost in round trips, the time since the
// step before divided by the RTT and rounded, and their sum; ok is false
// when the RTT is unknown or too small to count by (under a millisecond,
// where the machines' own work outweighs the path).
func (t *Trace) RoundTrips() (per []int, total int, ok bool) {
	if t == nil {
		return nil, 0, false
	}
	t.mu.Lock()
	rtt := t.rtt
	t.mu.Unlock()
	if rtt < time.Millisecond {
		return nil, 0, false
	}
	var prev time.Duration
	for _, s := range t.Steps() {
		n := int(math.Round(float64(s.At-prev) / float64(rtt)))
		per = append(per, n)
		total += n
		prev = s.At
	}
	return per, total, true
}

// Summary is the -v line: the round trips before the first byte and what
// each step cost, or the steps' times when the RTT is too small to count
// round trips by. It is "" before anything was marked.
func (t *Trace) Summary() string {
	steps := t.Steps()
	if len(steps) == 0 {
		return ""
	}
	last := steps[len(steps)-1]
	until := "before the first byte"
	if last.Name != FirstByte {
		until = "up to the end of " + last.Name
	}
	per, total, ok := t.RoundTrips()
	var b strings.Builder
	if ok {
		t.mu.Lock()
		rtt := t.rtt
		t.mu.Unlock()
		fmt.Fprintf(&b, "%d round trips %s (", total, until)
		for i, s := range steps {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %d", s.Name, per[i])
		}
		fmt.Fprintf(&b, "; %s in all at an RTT of %s)", ms(last.At), ms(rtt))
		return b.String()
	}
	fmt.Fprintf(&b, "%s %s (", ms(last.At), until)
	for i, s := range steps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s at %s", s.Name, ms(s.At))
	}
	b.WriteString(")")
	return b.String()
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
