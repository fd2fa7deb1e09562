package transfer

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tar := TarOptions{Mode: TarForce}
	for _, tc := range []struct {
		name     string
		o        Options
		want     string // "" when Validate accepts o
		wantSCP  string // "" when ValidateSCP accepts o
		wantHint bool
	}{
		{name: "plain", o: Options{}},
		{name: "every SFTP feature", o: Options{Recursive: true, Verify: true, Skip: SkipChecksum, Shard: testPart{0, 2}, FilesFrom: []string{"a"}, Resume: true},
			wantSCP: "do not work with the legacy scp protocol (-O)", wantHint: true},
		{name: "tar tree", o: Options{Recursive: true, Tar: tar},
			wantSCP: "--tar does not work with the legacy scp protocol", wantHint: true},
		{name: "tar auto with verify", o: Options{Recursive: true, Verify: true, Tar: TarOptions{Mode: TarAuto}},
			wantSCP: "legacy scp protocol (-O)", wantHint: true},
		{name: "tar verify", o: Options{Recursive: true, Verify: true, Tar: tar},
			want: "--tar does not work with --verify", wantHint: true},
		// An empty list is a list: the option was given.
		{name: "tar files-from", o: Options{Recursive: true, FilesFrom: []string{}, Tar: tar},
			want: "--tar does not work with --files-from", wantHint: true},
		{name: "tar resume", o: Options{Recursive: true, Resume: true, Tar: tar},
			want: "--tar does not work with --resume", wantHint: true},
		{name: "tar without -r", o: Options{Tar: tar},
			want: "--tar goes with -r", wantHint: true},
		{name: "tar streams", o: Options{Recursive: true, Tar: TarOptions{Mode: TarAuto, Streams: 65}},
			want: "--tar-streams 65: want a number from 1 to 64"},
		{name: "negative tar streams", o: Options{Tar: TarOptions{Streams: -1}},
			want: "--tar-streams -1"},
		{name: "skip existing", o: Options{Skip: SkipExisting}, wantSCP: "legacy scp", wantHint: true},
		{name: "quick check", o: Options{Skip: SkipQuick}},
		{name: "always", o: Options{Skip: CopyAlways}},
		{name: "one shard", o: Options{Shard: testPart{0, 1}}, wantSCP: "legacy scp", wantHint: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error, want string) {
				t.Helper()
				if want == "" {
					if err != nil {
						t.Errorf("%s: %v, want accepted", what, err)
					}
					return
				}
				var oe *OptionError
				if !errors.As(err, &oe) || !strings.Contains(oe.Error(), want) {
					t.Fatalf("%s: %v, want an OptionError saying %q", what, err, want)
				}
				if (oe.Hint != "") != tc.wantHint {
					t.Errorf("%s: hint %q, want one: %v", what, oe.Hint, tc.wantHint)
				}
			}
			check("Validate", tc.o.Validate(), tc.want)
			// What Copy refuses, the legacy protocol refuses too.
			wantSCP := tc.wantSCP
			if tc.want != "" {
				wantSCP = tc.want
			}
			check("ValidateSCP", tc.o.ValidateSCP(), wantSCP)
		})
	}
}
