package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionLine(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}
	for _, tc := range []struct {
		name, v, c, d string
		bi            *debug.BuildInfo
		want          string
	}{
		{"release build", "1.4.0", "f00d", "2026-12-01", nil, "hpncp 1.4.0 (f00d, 2026-12-01)"},
		{"release build ignores build info", "1.4.0", "f00d", "2026-12-01",
			&debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}, Settings: rev}, "hpncp 1.4.0 (f00d, 2026-12-01)"},
		{"go install at a version", "dev", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "hpncp 1.2.3"},
		{"checkout build", "dev", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "hpncp dev (abc123)"},
		{"no build info", "dev", "", "", nil, "hpncp dev"},
	} {
		if got := versionLine(tc.v, tc.c, tc.d, tc.bi); got != tc.want {
			t.Errorf("%s: versionLine = %q, want %q", tc.name, got, tc.want)
		}
	}
}
