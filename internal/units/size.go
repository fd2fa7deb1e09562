package units

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// ParseSize parses a byte count for size flags (--chunk, --window,
// --tcp-rcvbuf, --tcp-sndbuf, hpncp bench --size, the benchmark scripts'
// --size): a decimal number, fractions allowed, with an optional unit,
// case-insensitive. K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024;
// KB, MB, GB, TB are powers of 1000, as in dd; B is bytes. "4M", "256k",
// "1.5g", "16MiB" and "1048576" are all valid. Fractional bytes are
// rounded down.
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	end := strings.IndexFunc(in, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end < 0 {
		end = len(in)
	}
	num, unit := in[:end], strings.ToLower(strings.TrimSpace(in[end:]))
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("parse size %q: %w", s, errNotNumber)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("parse size %q: unknown unit %q (use K, M, G, T, KiB…, KB… or B)", s, in[end:])
	}
	// Exact rational arithmetic: "0.1G" must not pick up float rounding.
	v, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("parse size %q: %w", s, errNotNumber)
	}
	v.Mul(v, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(v.Num(), v.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("parse size %q: too large", s)
	}
	return n.Int64(), nil
}

var errNotNumber = errors.New("not a number of bytes")

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseTCSize reads a byte count as tc(8) reads buffer and queue sizes: a
// whole number with an optional k, m or g, optionally followed by b or ib,
// all powers of 1024 ("1kb" is 1024, unlike ParseSize's 1000). It is for
// values given to tc and to the emulator alike (the WAN's --queue), so
// that both modes of the same benchmark get the same queue.
func ParseTCSize(s string) (int64, error) {
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

// FormatSize writes a size for people in powers of 1024, whole where it
// is and to one decimal otherwise: "512 B", "4 MiB", "1.5 GiB". It is
// what the -v lines and the socket-buffer warnings print.
func FormatSize(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	unit, div := "KiB", int64(1<<10)
	if n >= 1<<30 {
		unit, div = "GiB", 1<<30
	} else if n >= 1<<20 {
		unit, div = "MiB", 1<<20
	}
	if n%div == 0 {
		return fmt.Sprintf("%d %s", n/div, unit)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(div), unit)
}
