package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hpncp/hpncp/job"
	"github.com/hpncp/hpncp/transfer"
)

// Copier is the Runner of hpncp bench: each transfer is a copy job
// (package job) with the flags its Config stands for, the one a user's
// copy runs, start-up included (connections dialed ahead, windows
// warmed), so that a table measures what users get.
type Copier struct {
	// Conn holds the connection settings, as a copy's flags give them.
	Conn job.Conn
	// Host is the host measured; its Path is unused.
	Host transfer.Location
	// LocalRoot, when set, is the remote side's directory on this machine
	// (the embedded demo's): Remove deletes there without connecting,
	// which would cost the demo a second per removal.
	LocalRoot string
	// Logf, when not nil, receives each copy's -v log.
	Logf func(format string, args ...any)
	// Done, when not nil, is told of each copy that went to the end and
	// how long it took once connected.
	Done func(res *transfer.Result, took time.Duration)

	// streams is the most streams the last transfer used, and took how
	// long it took after connecting.
	streams int
	took    time.Duration
}

// Job is the copy of src to dst a user's command line with c's flags
// runs: every byte moved whatever the target holds (--force), the
// defaults of --chunk, --window, --tar and --cc, and c's --streams,
// --hpn-disabled or -O.
func (c Config) Job(src, dst transfer.Location) job.Job {
	return job.Job{
		Locations: []transfer.Location{src, dst},
		Legacy:    c.Legacy,
		Options:   transfer.Options{Skip: transfer.CopyAlways, Tar: transfer.TarOptions{Mode: transfer.TarAuto}},
		Tuning:    job.Tuning{Streams: c.Streams, HPNDisabled: c.HPNDisabled, Chunk: job.DefaultChunk, CC: "auto"},
	}
}

// copy runs one transfer from src to dst with c's settings and keeps the
// stream count and time it reports.
func (r *Copier) copy(ctx context.Context, c Config, src, dst transfer.Location) error {
	r.streams, r.took = 0, 0
	j := c.Job(src, dst)
	j.Conn, j.Options.Logf = r.Conn, r.Logf
	done, err := job.Copy(ctx, j)
	res := done.Engine
	if res == nil {
		return err
	}
	if err == nil && len(res.Errors) > 0 {
		// One file: its failure is the transfer's.
		err = res.Errors[0]
	}
	if err != nil {
		// The copy's error says that its streams failed; a server that
		// stopped responding says why.
		if done.Lost != nil && !errors.Is(err, context.Canceled) {
			return done.Lost
		}
		return err
	}
	// Timed from the connected ends on, as a copy's own report is.
	r.streams, r.took = res.MaxStreams, done.Took
	if r.Done != nil {
		r.Done(res, done.Took)
	}
	return nil
}

// LastStreams is the most streams the last transfer used; 0 if unknown.
func (r *Copier) LastStreams() int { return r.streams }

// LastTransfer is how long the last copy took once connected; 0 if unknown.
func (r *Copier) LastTransfer() time.Duration { return r.took }

func (r *Copier) remote(path string) transfer.Location {
	l := r.Host
	l.Path = path
	return l
}

// Upload copies local to remote on the host with c's settings.
func (r *Copier) Upload(ctx context.Context, c Config, local, remote string) error {
	return r.copy(ctx, c, transfer.Location{Path: local}, r.remote(remote))
}

// Download copies remote on the host to local with c's settings.
func (r *Copier) Download(ctx context.Context, c Config, remote, local string) error {
	return r.copy(ctx, c, r.remote(remote), transfer.Location{Path: local})
}

// Remove deletes remote on the host.
func (r *Copier) Remove(ctx context.Context, remote string) error {
	if r.LocalRoot != "" {
		if err := transfer.ValidName(remote); err != nil {
			return fmt.Errorf("remove %s: %w", remote, err)
		}
		return os.Remove(filepath.Join(r.LocalRoot, remote))
	}
	return job.Remove(ctx, r.Conn, r.remote(remote))
}
