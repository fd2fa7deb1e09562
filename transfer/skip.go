package transfer

import (
	"bytes"
	"context"
	"encoding/hex"
	"io/fs"
)

// SkipMode says which files already at the target a run leaves alone.
type SkipMode int

const (
	// CopyAlways copies every file, as scp does (--force).
	CopyAlways SkipMode = iota
	// SkipQuick skips a file whose target has the same size and the same
	// modification time to the second, as rsync's quick check. A copy
	// made with -p carries the source's time, so re-running a finished
	// -p copy sends nothing; without -p the target's time is that of the
	// copy and the file is sent again, as rsync would (use -p or
	// SkipChecksum to make re-runs free).
	SkipQuick
	// SkipChecksum skips a file whose target has the same size and the
	// same SHA-256 (--checksum). It reads both ends, or asks an end that
	// is a summer for the hash.
	SkipChecksum
	// SkipExisting skips every file whose target exists, whatever its
	// content (--ignore-existing).
	SkipExisting
)

// skip returns why src need not be copied over existing, the target's
// info: one of the report's skip reasons, or "" when it must be copied.
// With SkipChecksum it also returns the content's hex SHA-256.
func (c *copier) skip(ctx context.Context, src, dst Endpoint, si, existing fs.FileInfo) (string, string, error) {
	switch c.opts.Skip {
	case SkipExisting:
		return ReasonIgnoreExisting, "", nil
	case SkipQuick:
		if si.Size() != existing.Size() {
			return "", "", nil
		}
		switch s, t := si.ModTime().Unix(), existing.ModTime().Unix(); {
		case s == t:
			return ReasonQuickCheck, "", nil
		case c.opts.Resume && t > s:
			// The target was written after the source last changed: an
			// interrupted run without -p finished it.
			return ReasonResumeComplete, "", nil
		}
		return "", "", nil
	case SkipChecksum:
		if si.Size() != existing.Size() {
			return "", "", nil
		}
		a, err := c.sum256(ctx, src, si.Size())
		if err != nil {
			return "", "", err
		}
		b, err := c.sum256(ctx, dst, existing.Size())
		if err != nil {
			return "", "", err
		}
		if !bytes.Equal(a, b) {
			return "", "", nil
		}
		return ReasonChecksum, hex.EncodeToString(a), nil
	}
	return "", "", nil
}
