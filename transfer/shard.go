package transfer

import (
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
)

// Shard selects the part of a run one of Count machines copies: a file
// belongs to shard Index when the FNV-1a 64 hash of its path, relative to
// its source operand and slash-separated, is Index modulo Count. Runs of
// every shard of the same sources cover each file exactly once, with no
// coordinator. The zero Shard keeps every file.
type Shard struct {
	Index, Count int
}

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
