package report

import (
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Shard selects the part of a run one of Count machines copies: a file
// belongs to shard Index when the FNV-1a 64 hash of its path, relative to
// its source operand and slash-separated, is Index modulo Count. Runs of
// every shard of the same sources cover each file exactly once, with no
// coordinator. The zero Shard keeps every file. A Shard is the
// transfer.Part of a run given --shard.
type Shard struct {
	Index, Count int
}

// Split reports whether s keeps only part of the files: other runs copy
// the rest, at the same time as this one, into the same tree.
func (s Shard) Split() bool { return s.Count > 1 }

// ParseShard reads "i/n", with 0 <= i < n.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(s, "/")
	i, ierr := strconv.Atoi(is)
	n, nerr := strconv.Atoi(ns)
	if !ok || ierr != nil || nerr != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("parse shard %q: want i/n with 0 <= i < n, e.g. 0/4", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// Keep reports whether the file at rel, relative to its source operand,
// belongs to this shard.
func (s Shard) Keep(rel string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, rel)
	return h.Sum64()%uint64(s.Count) == uint64(s.Index)
}

// String is s as --shard takes it: "i/n".
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// parseShards reads a report's shards: each as --shard takes it and as
// String gives it back, all of one split (the same n), none twice. They
// come back in the order given.
func parseShards(list []string) ([]Shard, error) {
	shards := make([]Shard, 0, len(list))
	for _, v := range list {
		s, err := ParseShard(v)
		switch {
		case err != nil:
			return nil, fmt.Errorf("shards: %w", err)
		case s.String() != v:
			return nil, fmt.Errorf("shards: %q is written %q", v, s.String())
		case len(shards) > 0 && s.Count != shards[0].Count:
			return nil, fmt.Errorf("shards: %s and %s are not of one split", shards[0], s)
		case slices.Contains(shards, s):
			return nil, fmt.Errorf("shards: %s twice", s)
		}
		shards = append(shards, s)
	}
	return shards, nil
}
