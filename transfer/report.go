package transfer

// FileReport is what happened to one file of a run, as the run tells
// Options.Report once the file is done: the entries of the --json
// report (package report builds the document).
type FileReport struct {
	// Path is the source file as messages name it: "host:path" for a
	// remote one. Path and Target hold the names' bytes, UTF-8 or not.
	Path string
	// Bytes is the file bytes sent: its size when copied, 0 otherwise.
	Bytes  int64
	Status string
	// Error is the failure's message when Status is "failed".
	Error string
	// SHA256 is the hex SHA-256 of the content, present when --verify or
	// --checksum hashed the file.
	SHA256 string
	// ResumedFrom is where a resumed file's copy started: the bytes before
	// it were written by an earlier run and not sent again (not in Bytes).
	ResumedFrom int64
	// Target is where the file goes, named as Path is; absent when the
	// failure came before the target was known.
	Target string
	// Reason says why a skipped file was left alone: one of the Reason
	// constants. Only skipped files have one.
	Reason string
}

// A file's Status.
const (
	StatusCopied  = "copied"  // the file was written and renamed into place
	StatusSkipped = "skipped" // the target already had it; Reason says how it was told
	StatusFailed  = "failed"  // the file could not be copied; Error says why
)

// Why a file was skipped: the decisions of skip.go, by the flag or check
// that made them.
const (
	ReasonQuickCheck     = "quick-check"     // same size and modification time (the default)
	ReasonChecksum       = "checksum"        // same size and SHA-256 (--checksum)
	ReasonIgnoreExisting = "ignore-existing" // the target exists (--ignore-existing)
	// ReasonResumeComplete: with --resume, the same size and written after
	// the source last changed, by an interrupted run that finished it.
	ReasonResumeComplete = "resume-complete"
)

// report tells Options.Report what happened to one file.
func (c *copier) report(f FileReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reportLocked(f)
}

// reporting says whether a FileReport of a file that was copied goes
// anywhere: to Options.Report, or to the account of hard links.
func (c *copier) reporting() bool {
	return c.opts.Report != nil || c.links.tracking()
}

// reportLocked is report with c.mu held.
func (c *copier) reportLocked(f FileReport) {
	c.links.note(f)
	if c.opts.Report != nil {
		c.opts.Report(f)
	}
}
