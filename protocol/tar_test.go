package protocol

import "testing"

func TestParseTarProbe(t *testing.T) {
	for _, c := range []struct {
		out  string
		want TarSupport
	}{
		{"has zstd\nhas gzip\ntar (GNU tar) 1.34\n", TarSupport{GNU: true, Zstd: true, Gzip: true, Version: "tar (GNU tar) 1.34"}},
		// --zstd arrived in GNU tar 1.31: an older one gets gzip.
		{"has zstd\nhas gzip\ntar (GNU tar) 1.30\n", TarSupport{GNU: true, Gzip: true, Version: "tar (GNU tar) 1.30"}},
		{"has gzip\ntar (GNU tar) 1.35\n", TarSupport{GNU: true, Gzip: true, Version: "tar (GNU tar) 1.35"}},
		{"has zstd\nbsdtar 3.7.2 - libarchive 3.7.2\n", TarSupport{Version: "bsdtar 3.7.2 - libarchive 3.7.2"}},
		{"has gzip\n", TarSupport{}},
		{"", TarSupport{}},
	} {
		if got := parseTarProbe([]byte(c.out)); got != c.want {
			t.Errorf("parseTarProbe(%q) = %+v, want %+v", c.out, got, c.want)
		}
	}
}

func TestTarCommands(t *testing.T) {
	dir := "it's a $(dir)"
	for _, c := range []struct{ got, want string }{
		{tarExtractCommand(dir, TarOptions{}),
			`tar -x -f - -k --no-same-owner --no-same-permissions -m -C 'it'\''s a $(dir)'`},
		{tarExtractCommand(dir, TarOptions{Preserve: true, Compress: "zstd"}),
			`tar -x -f - -k --no-same-owner -p --zstd -C 'it'\''s a $(dir)'`},
		{tarCreateCommand(dir, TarOptions{Compress: "gzip"}),
			`tar -c -f - -h --hard-dereference --no-recursion -z -C 'it'\''s a $(dir)' --null -T -`},
	} {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
}
