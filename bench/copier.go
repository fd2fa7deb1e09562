package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
)

// Copier is the Runner of hpncp bench: each transfer is hpncp's own copy,
// with the settings of a copy given the flags its Config stands for, over
// ends opened for that transfer, so that a table measures what users get.
type Copier struct {
	// SSH holds the connection settings, as a copy's flags give them.
	SSH sshconn.Options
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

// benchChunk is the bytes a stream moves at once: --chunk's default.
const benchChunk = 1 << 20

// CopyOptions are the options of a copy run with c's flags: every byte
// moved whatever the target holds (--force), the window controller's
// plan in chunks of --chunk's default, and tar mode as a copy with those
// flags would choose it.
func (c Config) CopyOptions() transfer.Options {
	// The copy command's controller: what one connection's socket buffers
	// carry shapes its plans as much as the windows do.
	cfg := window.Config{Fixed: c.Streams, ConnBytes: sshconn.ConnBytes(0, 0)}
	tar := transfer.TarAuto
	if c.HPNDisabled {
		// --hpn-disabled: one stream on one connection, kept full.
		cfg = window.Config{Fixed: 1, MaxConns: 1, StreamsPerConn: 1}
		tar = transfer.TarOff
	}
	if c.Legacy {
		tar = transfer.TarOff
	}
	return transfer.Options{
		Skip: transfer.CopyAlways,
		Parallel: transfer.ParallelOptions{
			Chunk:      benchChunk,
			MinSize:    4 * benchChunk,
			Controller: func() *window.Controller { return window.New(cfg) },
		},
		Tar: transfer.TarOptions{Mode: tar},
	}
}

// copy runs one transfer from src to dst with c's settings and keeps the
// stream count and time it reports.
func (r *Copier) copy(ctx context.Context, c Config, src, dst transfer.Location) error {
	r.streams, r.took = 0, 0
	// The congestion control of the copy command's --cc auto.
	cc, ccBest := ends.AutoCC(dst.Remote())
	hosts := ends.New(ends.Options{SSH: r.SSH, Legacy: c.Legacy, CC: cc, CCBestEffort: ccBest})
	defer hosts.Close()
	defer hosts.AbortOnCancel(ctx)()
	o := c.CopyOptions()
	o.Logf = r.Logf
	run, err := hosts.Open(ctx, []transfer.Location{src, dst}, o)
	if err != nil {
		return err
	}
	// Timed from the connected ends on, as a copy's own report is.
	start := time.Now()
	res, err := run.Copy(ctx)
	took := time.Since(start)
	if err == nil && len(res.Errors) > 0 {
		// One file: its failure is the transfer's.
		err = res.Errors[0]
	}
	if err != nil {
		// The copy's error says that its streams failed; a server that
		// stopped responding says why.
		if lost := hosts.Lost(); lost != nil && !errors.Is(err, context.Canceled) {
			return lost
		}
		return err
	}
	r.streams, r.took = res.MaxStreams, took
	if r.Done != nil {
		r.Done(res, took)
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
	hosts := ends.New(ends.Options{SSH: r.SSH})
	defer hosts.Close()
	l := r.remote(remote)
	e, err := hosts.Endpoint(ctx, l)
	if err != nil {
		return err
	}
	if err := e.FS.Remove(e.Path); err != nil {
		return fmt.Errorf("remove %s%s: %w", l.HostLabel(), remote, err)
	}
	return nil
}
