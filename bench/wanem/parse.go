package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseRate reads a link rate in bits per second, written as tc(8) writes
// rates: a number with an optional SI suffix (kbit, mbit, gbit, tbit, or
// just k, m, g, t). "0" and "unlimited" mean no serialisation at all.
// tc's "bps" means bytes per second, a classic source of 8× mistakes, so it
// is refused rather than guessed.
func parseRate(s string) (int64, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if v == "unlimited" || v == "0" {
		return 0, nil
	}
	if strings.HasSuffix(v, "bps") {
		return 0, fmt.Errorf("rate %q: use bit units (kbit, mbit, gbit); tc's bps means bytes per second", s)
	}
	v = strings.TrimSuffix(v, "bit")
	mult := 1.0
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k':
			mult = 1e3
		case 'm':
			mult = 1e6
		case 'g':
			mult = 1e9
		case 't':
			mult = 1e12
		}
		if mult != 1 {
			v = v[:n-1]
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f*mult > 1e15 {
		return 0, fmt.Errorf("rate %q: want a number of bit/s such as 1gbit, 100mbit or unlimited", s)
	}
	r := int64(f * mult)
	if f > 0 && r < 8 {
		// Below one byte per second the serialisation time of a packet
		// overflows any useful range; nobody benchmarks that.
		return 0, fmt.Errorf("rate %q: below 8 bit/s", s)
	}
	return r, nil
}

// parseSize reads a byte count with an optional binary suffix (k, m, g,
// optionally followed by b or ib), as tc(8) writes buffer sizes.
func parseSize(s string) (int64, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	v = strings.TrimSuffix(v, "ib")
	v = strings.TrimSuffix(v, "b")
	mult := int64(1)
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		}
		if mult != 1 {
			v = v[:n-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("size %q: want a byte count such as 1500000, 256k or 12m", s)
	}
	return n * mult, nil
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
