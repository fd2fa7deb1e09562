package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hpncp/hpncp/internal/units"
)

// parseRate reads --rate in bits per second as units.ParseBitRate reads
// it, tc's syntax (tc's "bps", bytes per second, is refused rather than
// guessed), within what the emulator can serialise: below 8 bit/s a
// packet's serialisation time overflows any useful range, and nobody
// benchmarks that.
func parseRate(s string) (int64, error) {
	r, err := units.ParseBitRate(s)
	switch {
	case err != nil:
		return 0, err
	case r > 1e15:
		return 0, fmt.Errorf("rate %q: want a number of bit/s such as 1gbit, 100mbit or unlimited", s)
	case r > 0 && r < 8:
		return 0, fmt.Errorf("rate %q: below 8 bit/s", s)
	}
	return r, nil
}

// parseLoss reads a loss probability as a fraction (0.01) or a percentage
// (1%).
func parseLoss(s string) (float64, error) {
	v := strings.TrimSpace(s)
	scale := 1.0
	if strings.HasSuffix(v, "%") {
		v = strings.TrimSuffix(v, "%")
		scale = 100
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f/scale > 1 {
		return 0, fmt.Errorf("loss %q: want a probability between 0 and 1, or a percentage such as 0.5%%", s)
	}
	return f / scale, nil
}

// queueSize is --queue: a size in bytes, or a multiple of the
// bandwidth-delay product (bdps > 0) that each direction resolves at its
// own rate.
type queueSize struct {
	bytes int64
	bdps  float64
}

// parseQueue reads --queue: auto (one BDP), a multiple of the BDP such as
// 0.25bdp, or bytes as tc writes them (256k, 12m). Multiples run from
// 0.01 to 100: below, the 32-packet floor decides anyway; above, the
// queue is no longer a router's.
func parseQueue(s string) (queueSize, error) {
	v := strings.TrimSpace(s)
	if v == "auto" {
		return queueSize{bdps: 1}, nil
	}
	if m, ok := strings.CutSuffix(strings.ToLower(v), "bdp"); ok {
		f, err := strconv.ParseFloat(m, 64)
		if err != nil || !(f >= 0.01 && f <= 100) {
			return queueSize{}, fmt.Errorf("%q: want a multiple of the bandwidth-delay product from 0.01bdp to 100bdp", s)
		}
		return queueSize{bdps: f}, nil
	}
	b, err := units.ParseTCSize(v)
	if err != nil {
		return queueSize{}, fmt.Errorf("%q: want auto, bytes such as 256k, or a multiple of the bandwidth-delay product such as 0.5bdp", s)
	}
	return queueSize{bytes: b}, nil
}
