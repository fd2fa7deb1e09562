package main

import (
	"io"
	"math"
	"slices"
	"testing"
	"time"
)

func TestLinkSerialisesAndDelays(t *testing.T) {
	// 1500 bytes at 1 Gbit/s take 12 µs; one way is 25 ms.
	l := newLink(1e9, 25*time.Millisecond, 1<<20, 0, 1)
	const ser = 12_000
	const delay = 25_000_000

	// A burst of three arriving at once leaves back to back.
	for i := range 3 {
		at, v := l.admit(0, 1500)
		if v != deliver {
			t.Fatalf("packet %d: verdict %d, want deliver", i, v)
		}
		if want := int64(i+1)*ser + delay; at != want {
			t.Errorf("packet %d leaves at %d ns, want %d", i, at, want)
		}
	}
	// One arriving after the link went idle is not held by the burst.
	if at, _ := l.admit(1_000_000, 1500); at != 1_000_000+ser+delay {
		t.Errorf("packet on idle link leaves at %d, want %d", at, 1_000_000+ser+delay)
	}
}

func TestLinkDropTail(t *testing.T) {
	// A queue of exactly four 1000-byte packets, the one being sent included.
	l := newLink(8e6, 0, 4000, 0, 1) // 1 ms per packet
	var got []verdict
	for range 6 {
		_, v := l.admit(0, 1000)
		got = append(got, v)
	}
	want := []verdict{deliver, deliver, deliver, deliver, queueDrop, queueDrop}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("verdicts %v, want %v", got, want)
		}
	}
	if l.peak != 4000 {
		t.Errorf("peak backlog %d, want 4000", l.peak)
	}
	// After 1.5 ms one packet is sent and half of the next: room for one.
	if _, v := l.admit(1_500_000, 1000); v != deliver {
		t.Errorf("after 1.5 ms: verdict %d, want deliver", v)
	}
	if _, v := l.admit(1_500_000, 1000); v != queueDrop {
		t.Errorf("second after 1.5 ms: verdict %d, want queueDrop", v)
	}
}

func TestLinkUnlimitedRate(t *testing.T) {
	l := newLink(0, 5*time.Millisecond, 0, 0, 1)
	for i := range 1000 {
		at, v := l.admit(int64(i), 1500)
		if v != deliver || at != int64(i)+5_000_000 {
			t.Fatalf("packet %d: at %d verdict %d, want pure delay", i, at, v)
		}
	}
}

func TestLinkLoss(t *testing.T) {
	const n = 200_000
	run := func(seed uint64) (lost int, pattern []bool) {
		l := newLink(1e9, 0, 1<<30, 0.01, seed)
		for i := range n {
			_, v := l.admit(int64(i)*20_000, 1500)
			pattern = append(pattern, v == lossDrop)
			if v == lossDrop {
				lost++
			}
		}
		return lost, pattern
	}
	lost, p1 := run(7)
	// 1 % of 200000 is 2000 with a standard deviation of about 44.
	if math.Abs(float64(lost)-2000) > 250 {
		t.Errorf("lost %d of %d at p=0.01, want about 2000", lost, n)
	}
	_, p2 := run(7)
	_, p3 := run(8)
	same, differ := true, false
	for i := range p1 {
		same = same && p1[i] == p2[i]
		differ = differ || p1[i] != p3[i]
	}
	if !same {
		t.Error("same seed gave a different loss pattern")
	}
	if !differ {
		t.Error("different seeds gave the same loss pattern")
	}

	// A lost packet still took its serialisation time.
	l := newLink(8e6, 0, 1<<20, 1, 1)
	l.admit(0, 1000)
	if l.busyUntil != 1_000_000 {
		t.Errorf("after a lost 1000-byte packet at 8 Mbit/s the link is busy until %d, want 1000000", l.busyUntil)
	}
}

func TestQueueFor(t *testing.T) {
	tests := []struct {
		bdps float64
		rate int64
		rtt  time.Duration
		want int64
	}{
		// 1 Gbit/s × 100 ms is 12.5 MB.
		{1, 1e9, 100 * time.Millisecond, 12_500_000},
		{0.25, 1e9, 100 * time.Millisecond, 3_125_000},
		{0.5, 1e9, 100 * time.Millisecond, 6_250_000},
		{2, 1e9, 100 * time.Millisecond, 25_000_000},
		// A slow direction's BDP is its own: 100 Mbit/s × 100 ms.
		{0.5, 100e6, 100 * time.Millisecond, 625_000},
		// The floor: 32 packets of 1500 bytes.
		{0.25, 1e9, time.Millisecond, 48_000},
		{2, 0, 100 * time.Millisecond, 48_000},
	}
	for _, tt := range tests {
		if got := queueFor(tt.bdps, tt.rate, tt.rtt, 1500); got != tt.want {
			t.Errorf("queueFor(%g, %d, %v) = %d, want %d", tt.bdps, tt.rate, tt.rtt, got, tt.want)
		}
	}
}

func TestLinkQueueBoundsBacklog(t *testing.T) {
	// A quarter BDP at 1 Gbit/s and 100 ms, offered twice the rate for a
	// second: the backlog fills the queue and never passes it, and no
	// delivered packet waits longer than the queue takes to drain.
	queue := queueFor(0.25, 1e9, 100*time.Millisecond, 1500)
	l := newLink(1e9, 50*time.Millisecond, queue, 0, 1)
	drain := int64(float64(queue) * l.nsPerByte)
	var delivered, dropped int
	for i := range 166_000 {
		now := int64(i) * 6_000
		at, v := l.admit(now, 1500)
		switch v {
		case deliver:
			delivered++
			if wait := at - l.delay - now; wait > drain {
				t.Fatalf("packet %d waited %d ns in the queue, longer than draining it (%d ns)", i, wait, drain)
			}
		case queueDrop:
			dropped++
		default:
			t.Fatalf("packet %d: verdict %d", i, v)
		}
	}
	if l.peak > queue || l.peak < queue-1500 {
		t.Errorf("peak backlog %d, want the queue's %d at most and within a packet of it", l.peak, queue)
	}
	// Half the offered packets fit through the link, less the queue.
	if dropped < 80_000 || delivered < 80_000 {
		t.Errorf("%d delivered, %d dropped; want about half each", delivered, dropped)
	}
}

func TestLinkJitter(t *testing.T) {
	const jitter = 2_000_000 // ns
	run := func(seed uint64, gap int64, n int) (extra []int64, out []int64) {
		l := newLink(1e9, 25*time.Millisecond, 1<<30, 0, seed).vary(jitter, 0)
		for i := range n {
			at, v := l.admit(int64(i)*gap, 1500)
			if v != deliver {
				t.Fatalf("packet %d: verdict %d without loss or reordering, want deliver", i, v)
			}
			extra = append(extra, at-l.delay-l.busyUntil)
			out = append(out, at)
		}
		return extra, out
	}

	// Packets further apart than the jitter: each draws its own extra
	// delay, spread evenly over [0, jitter].
	extra, _ := run(1, 10_000_000, 20_000)
	var sum float64
	lo, hi := int64(jitter), int64(0)
	for i, e := range extra {
		if e < 0 || e > jitter {
			t.Fatalf("packet %d: extra delay %d ns, want within [0, %d]", i, e, jitter)
		}
		sum += float64(e)
		lo, hi = min(lo, e), max(hi, e)
	}
	// The mean of 20000 uniform draws: jitter/2 with a standard error of
	// 0.2 % of the jitter.
	if mean := sum / float64(len(extra)); math.Abs(mean-jitter/2) > 0.02*jitter {
		t.Errorf("mean extra delay %.0f ns, want about %d", mean, jitter/2)
	}
	if lo > jitter/100 || hi < jitter*99/100 {
		t.Errorf("extra delays from %d to %d ns, want them to span [0, %d]", lo, hi, jitter)
	}

	// Back-to-back packets: the order is kept, each still within its
	// jitter, and a seed repeats its times.
	extra, out := run(7, 12_000, 20_000)
	for i := range out {
		if extra[i] < 0 || extra[i] > jitter {
			t.Fatalf("packet %d: extra delay %d ns, want within [0, %d]", i, extra[i], jitter)
		}
		if i > 0 && out[i] < out[i-1] {
			t.Fatalf("packet %d leaves at %d, before the one ahead of it (%d)", i, out[i], out[i-1])
		}
	}
	_, again := run(7, 12_000, 20_000)
	_, other := run(8, 12_000, 20_000)
	if !slices.Equal(out, again) {
		t.Error("same seed gave different delivery times")
	}
	if slices.Equal(out, other) {
		t.Error("different seeds gave the same delivery times")
	}
}

func TestLinkReorder(t *testing.T) {
	const n = 200_000
	count := func(p float64, seed uint64) (ahead int) {
		l := newLink(1e9, 25*time.Millisecond, 1<<30, 0, seed).vary(0, p)
		for i := range n {
			_, v := l.admit(int64(i)*12_000, 1500)
			switch v {
			case deliverAhead:
				ahead++
			case deliver:
			default:
				t.Fatalf("packet %d: verdict %d", i, v)
			}
		}
		return ahead
	}
	if got := count(0, 1); got != 0 {
		t.Errorf("%d packets let ahead without --reorder", got)
	}
	// 1 % of 200000 is 2000 with a standard deviation of about 44.
	if got := count(0.01, 3); math.Abs(float64(got)-2000) > 250 {
		t.Errorf("%d packets of %d let ahead at 0.01, want about 2000", got, n)
	}
	if a, b := count(0.01, 3), count(0.01, 3); a != b {
		t.Errorf("same seed let %d and %d packets ahead", a, b)
	}
}

func TestLinkRateBack(t *testing.T) {
	// An asymmetric link: 100 Mbit/s from A to B, 1 Gbit/s back.
	o, err := parseFlags([]string{"--rtt", "100ms", "--rate", "100mbit", "--rate-back", "1gbit"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ab, ba := o.links()
	for _, d := range []struct {
		name string
		l    *link
		ser  int64 // ns per 1500-byte packet
	}{{"A>B", ab, 120_000}, {"B>A", ba, 12_000}} {
		// A burst leaves back to back at the direction's own rate.
		for i := range 4 {
			at, v := d.l.admit(0, 1500)
			if want := int64(i+1)*d.ser + 50_000_000; v != deliver || at != want {
				t.Errorf("%s packet %d: leaves at %d (verdict %d), want %d", d.name, i, at, v, want)
			}
		}
	}
}
