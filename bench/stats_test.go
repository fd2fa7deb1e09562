package bench

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want Summary
	}{
		{"none", nil, Summary{}},
		{"one run", []float64{7}, Summary{Min: 7, Median: 7, Max: 7, Avg: 7, SD: 0}},
		// mean 5, squared deviations 9+1+1+9 = 20, sample variance 20/3
		{"even count, unsorted", []float64{8, 2, 6, 4}, Summary{Min: 2, Median: 5, Max: 8, Avg: 5, SD: math.Sqrt(20.0 / 3)}},
		// mean 4, squared deviations 4+0+0+4+0 ... for 2,4,4,6,4: 4+0+0+4+0 = 8, /4
		{"odd count", []float64{4, 2, 6, 4, 4}, Summary{Min: 2, Median: 4, Max: 6, Avg: 4, SD: math.Sqrt(2)}},
		{"equal runs", []float64{3, 3, 3}, Summary{Min: 3, Median: 3, Max: 3, Avg: 3, SD: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summarize(tt.in)
			for _, f := range []struct {
				what      string
				got, want float64
			}{
				{"min", got.Min, tt.want.Min}, {"median", got.Median, tt.want.Median}, {"max", got.Max, tt.want.Max},
				{"avg", got.Avg, tt.want.Avg}, {"sd", got.SD, tt.want.SD},
			} {
				if math.Abs(f.got-f.want) > 1e-9 {
					t.Errorf("summarize(%v).%s = %g, want %g", tt.in, f.what, f.got, f.want)
				}
			}
			if len(tt.in) > 0 && !(got.Min <= got.Median && got.Median <= got.Max) {
				t.Errorf("summarize(%v) = %+v: not min ≤ median ≤ max", tt.in, got)
			}
		})
	}
}

func TestSummarizeKeepsInput(t *testing.T) {
	in := []float64{3, 1, 2}
	summarize(in)
	if in[0] != 3 || in[1] != 1 || in[2] != 2 {
		t.Errorf("summarize reordered its input: %v", in)
	}
}

func TestParseConfigs(t *testing.T) {
	cs, err := ParseConfigs("hpnd, s8,hpn,hpnd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if got := len(names); got != 3 || names[0] != "hpnd" || names[1] != "s8" || names[2] != "hpn" {
		t.Errorf("ParseConfigs = %v, want [hpnd s8 hpn]", names)
	}
	if cs[1].Streams != 8 || !cs[0].HPNDisabled {
		t.Errorf("ParseConfigs settings wrong: %+v", cs)
	}
	all, err := ParseConfigs("all")
	if err != nil || len(all) != len(Configs) {
		t.Errorf("ParseConfigs(all) = %d configurations, %v", len(all), err)
	}
	for _, bad := range []string{"", "s3", "hpn,bogus"} {
		if _, err := ParseConfigs(bad); err == nil {
			t.Errorf("ParseConfigs(%q) succeeded", bad)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"1gbit": 1e9, "100mbit": 100e6, "500Kbit": 500e3, "2.5Gbit/s": 2.5e9, "1e6": 1e6, "0": 0, "10mbps": 10e6,
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "-1gbit"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) succeeded", bad)
		}
	}
}
