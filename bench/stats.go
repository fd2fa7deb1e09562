package bench

import (
	"math"
	"slices"
)

// Summary is the spread of one quantity over a configuration's runs.
type Summary struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	Avg    float64 `json:"avg"`
	// SD is the sample standard deviation (n−1 in the denominator): the
	// runs are a sample of what the path does, not all it can do. It is 0
	// for a single run.
	SD float64 `json:"sd"`
}

// summarize returns the summary of xs; the zero Summary for none.
func summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	n := len(s)
	out := Summary{Min: s[0], Max: s[n-1], Avg: sum / float64(n)}
	if n%2 == 1 {
		out.Median = s[n/2]
	} else {
		out.Median = (s[n/2-1] + s[n/2]) / 2
	}
	if n > 1 {
		var sq float64
		for _, x := range s {
			d := x - out.Avg
			sq += d * d
		}
		out.SD = math.Sqrt(sq / float64(n-1))
	}
	return out
}
