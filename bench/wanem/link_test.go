package main

import (
	"math"
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
