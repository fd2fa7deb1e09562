package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

// TestDocsMarkdown checks that docs/hpncp.1.md is the page this build's
// `hpncp __docs --markdown` writes, so that the repository's flag
// reference says what --help and the man page say.
func TestDocsMarkdown(t *testing.T) {
	dir := t.TempDir()
	if _, errOut, code := runArgs(t, "__docs", "--markdown", dir); code != 0 {
		t.Fatalf("hpncp __docs --markdown: exit %d, stderr %q", code, errOut)
	}
	got, err := os.ReadFile(filepath.Join(dir, markdownName))
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join("..", "..", "docs", markdownName)
	want, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) == string(want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	line := 0
	for line < min(len(g), len(w)) && g[line] == w[line] {
		line++
	}
	at := func(ls []string) string {
		if line < len(ls) {
			return ls[line]
		}
		return "(end of file)"
	}
	t.Errorf("docs/%s is not what the help texts and flags make: line %d is %q, want %q;\nrun go run ./cmd/hpncp __docs --markdown docs/ to update it",
		markdownName, line+1, at(w), at(g))
}

// TestDocsFlagRows checks that the page's table finds every row of a
// help text's flag lists, continuation lines joined, and that a flag
// --help leaves out is an error rather than a missing row.
func TestDocsFlagRows(t *testing.T) {
	text := "Flags:\n" +
		"  -r            copy directories recursively\n" +
		"  -4, -6        use IPv4 or IPv6 only\n" +
		"  --streams N|auto       streams per large file;\n" +
		"                         auto probes\n" +
		"  Not a row: indented two, no dash.\n"
	got := helpEntries(text)
	want := []helpEntry{
		{"-r", "copy directories recursively"},
		{"-4, -6", "use IPv4 or IPv6 only"},
		{"--streams N|auto", "streams per large file; auto probes"},
	}
	if len(got) != len(want) {
		t.Fatalf("helpEntries = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %q, want %q", i, got[i], want[i])
		}
	}
	if n := got[1].names(); len(n) != 2 || n[0] != "-4" || n[1] != "-6" {
		t.Errorf("names of %q = %q", got[1].flags, n)
	}
	if n := got[2].names(); len(n) != 1 || n[0] != "--streams" {
		t.Errorf("names of %q = %q", got[2].flags, n)
	}

	flags := []cli.Flag{
		&cli.BoolFlag{Name: "4"},
		&cli.StringFlag{Name: "streams"},
		&cli.BoolFlag{Name: "6"},
		&cli.BoolFlag{Name: "A", Hidden: true},
		&cli.BoolFlag{Name: "r"},
	}
	rows, err := flagRows(text, flags)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0] != want[1] || rows[1] != want[2] || rows[2] != want[0] {
		t.Errorf("flagRows = %q, want the rows of -4, --streams and -r, in that order, once each", rows)
	}
	_, err = flagRows(text, append(flags, &cli.BoolFlag{Name: "links"}))
	if err == nil || !strings.Contains(err.Error(), "--links") {
		t.Errorf("flagRows with a flag the text lacks: error %v, want one naming --links", err)
	}
}
