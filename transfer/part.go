package transfer

import "errors"

// Part is the share of a job's files one run copies when the job is split
// between runs that copy, at the same time, into one tree: hpncp --shard,
// whose report.Shard is one. Options.Shard nil keeps every file.
type Part interface {
	// Keep reports whether the file at rel, relative to its source
	// operand and slash-separated, is this run's.
	Keep(rel string) bool
	// Split reports whether other runs copy the rest, at the same time,
	// into the same tree.
	Split() bool
}

// Split reports whether o copies one part of a job that other runs copy
// the rest of at the same time (Part.Split).
func (o Options) Split() bool { return o.Shard != nil && o.Shard.Split() }

// keeps reports whether the file at rel, relative to its source operand,
// is o's to copy.
func (o *Options) keeps(rel string) bool { return o.Shard == nil || o.Shard.Keep(rel) }

// madeByOther reports whether dst, a directory this run failed to
// create, is one now: the shards of a job create the same directories at
// once, and all but one find another's.
func madeByOther(dst Endpoint) bool {
	fi, err := dst.FS.Stat(dst.Path)
	return err == nil && fi.IsDir()
}

// errShardTarget refuses to copy the directory src as target, which does
// not exist: the shards of a job, run at once, would each lay the tree
// out by whether another had made target yet (as it, or inside it, by
// scp's rule), and split it between the two.
func errShardTarget(src, target Endpoint) error {
	return &Error{Op: "copy " + src.String() + " to", Path: target.String(),
		Err:  errors.New("a shard copies a directory only into an existing one"),
		Hint: "create the target directory first, then run every shard into it"}
}
