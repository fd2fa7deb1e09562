package job

import "testing"

// TestAutoCCAsksTheKernel: --cc auto gives an upload bbr only where the
// kernel lets this user set it, and otherwise plans the copy as the
// system's algorithm (an ordinary user on a stock kernel), rather than
// as a bbr its connections will not run; a download keeps the system's.
func TestAutoCCAsksTheKernel(t *testing.T) {
	kernel := canSetCongestion
	t.Cleanup(func() { canSetCongestion = kernel })
	for _, tc := range []struct {
		name       string
		allowed    bool
		upload     bool
		want       string
		bestEffort bool
	}{
		{"upload, bbr allowed", true, true, "bbr", true},
		{"upload, bbr refused", false, true, "", false},
		{"download, bbr allowed", true, false, "", false},
		{"download, bbr refused", false, false, "", false},
	} {
		canSetCongestion = func(name string) bool { return tc.allowed && name == "bbr" }
		s, err := Tuning{CC: "auto"}.settings(tc.upload)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.cc != tc.want || s.ccBestEffort != tc.bestEffort {
			t.Errorf("%s: cc %q (best effort %v), want %q (%v)", tc.name, s.cc, s.ccBestEffort, tc.want, tc.bestEffort)
		}
	}
	// --cc system and a named algorithm are what was asked, whatever the
	// kernel allows: a refusal of a named one is the copy's error.
	canSetCongestion = func(string) bool { return false }
	for cc, want := range map[string]string{"system": "", "bbr": "bbr"} {
		s, err := Tuning{CC: cc}.settings(true)
		if err != nil || s.cc != want || s.ccBestEffort {
			t.Errorf("--cc %s: cc %q (best effort %v), %v; want %q, not best effort", cc, s.cc, s.ccBestEffort, err, want)
		}
	}
}
