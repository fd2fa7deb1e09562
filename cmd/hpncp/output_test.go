package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hpncp/hpncp/report"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// The report's error is what stderr shows for the run's error, and its
// kind names the exit code the run ends with.
func TestRunError(t *testing.T) {
	conn := &sshconn.Error{Op: "connect to host", Host: "h:1", Err: errors.New("connection refused"), Hint: "is sshd listening?"}
	for _, tc := range []struct {
		name string
		err  error
		code int
		want *report.RunError
	}{
		{"success", nil, 0, nil},
		{"usage", usagef("try this", "bad flag"), 2, &report.RunError{Message: "bad flag", Hint: "try this", Kind: report.KindUsage}},
		{"connection", fmt.Errorf("open: %w", conn), 255,
			&report.RunError{Message: conn.Error(), Hint: "is sshd listening?", Kind: report.KindConnection}},
		{"partial", &partialError{failed: 1, done: 2}, 3,
			&report.RunError{Message: "1 file(s) or directories could not be copied", Kind: report.KindPartial}},
		{"partial, connection lost", &partialError{failed: 1, done: 2, lost: true}, 255,
			&report.RunError{Message: "1 file(s) or directories could not be copied", Kind: report.KindConnection}},
		{"nothing copied", &partialError{failed: 2}, 1,
			&report.RunError{Message: "2 file(s) or directories could not be copied", Kind: report.KindFailed}},
		{"file error", &transfer.Error{Op: "read", Path: "x", Err: errors.New("gone"), Hint: "look"}, 1,
			&report.RunError{Message: "read x: gone", Hint: "look", Kind: report.KindFailed}},
		{"interrupted", fmt.Errorf("copy: %w", context.Canceled), 130, &report.RunError{Message: "interrupted", Kind: report.KindInterrupted}},
	} {
		code, got := runError(tc.err)
		if code != tc.code || (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: runError = %d, %+v; want %d, %+v", tc.name, code, got, tc.code, tc.want)
		}
	}
}

// Only a --json run keeps what became of each file: a run of a million
// files without it would hold a million entries that nothing prints.
func TestCopyRecordKeepsFilesOnlyForJSON(t *testing.T) {
	var plain copyRecord
	if r := plain.reporter(); r != nil {
		r(transfer.FileReport{Path: "a", Status: transfer.StatusCopied})
	}
	if len(plain.files) != 0 {
		t.Errorf("without --json the record kept %d files", len(plain.files))
	}
	withJSON := copyRecord{perFile: true}
	r := withJSON.reporter()
	if r == nil {
		t.Fatal("with --json there is no reporter")
	}
	r(transfer.FileReport{Path: "a", Status: transfer.StatusCopied})
	if len(withJSON.files) != 1 || withJSON.files[0].Path != "a" {
		t.Errorf("with --json the record has %+v, want the one file", withJSON.files)
	}
}
