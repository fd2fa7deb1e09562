package transfer

import (
	"context"
	"errors"
	"io/fs"
	"sync"

	"github.com/hpncp/hpncp/protocol"
)

// Temporary files are created owner-only (0600), so that nobody else can
// open one while it fills, and get their final mode just before the
// rename. Without -p a new file's final mode is the source's permissions
// under the receiving end's umask, as scp gives it; a file created 0600
// no longer shows that umask, and SFTP has no request to ask for it, so
// each end's is learnt once a run, from an empty directory made, looked
// at and removed beside the first file that needs it.

// umaskFallback is the umask assumed where it cannot be learnt: the
// file then stays owner-only rather than open wider than asked.
const umaskFallback fs.FileMode = 0o077

// umasks remembers the umask of each end of a run, by the end's label.
type umasks struct {
	mu sync.Mutex
	m  map[string]*umaskProbe
}

type umaskProbe struct {
	done chan struct{} // closed once mask is set
	mask fs.FileMode
}

// umaskProber is an end that learns its umask in fewer round trips than
// a Mkdir, a Stat and a Remove (protocol.SFTP).
type umaskProber interface {
	Umask(ctx context.Context, probe string) (fs.FileMode, error)
}

// start begins learning the umask of fsys, in dir, unless it is known or
// being learnt, and returns the probe to wait for.
func (u *umasks) start(ctx context.Context, fsys FS, dir string, logf func(string, ...any)) *umaskProbe {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p, ok := u.m[fsys.Label()]; ok {
		return p
	}
	if u.m == nil {
		u.m = map[string]*umaskProbe{}
	}
	p := &umaskProbe{done: make(chan struct{})}
	u.m[fsys.Label()] = p
	go func() {
		defer close(p.done)
		mask, err := probeUmask(ctx, fsys, dir)
		if err != nil {
			mask = umaskFallback
			if logf != nil {
				logf("new files get mode 0600 and less on %s: its umask could not be learnt: %v", Endpoint{fsys, dir}, err)
			}
		}
		p.mask = mask
	}()
	return p
}

// wait waits until every probe started is done.
func (u *umasks) wait() {
	u.mu.Lock()
	probes := make([]*umaskProbe, 0, len(u.m))
	for _, p := range u.m {
		probes = append(probes, p)
	}
	u.mu.Unlock()
	for _, p := range probes {
		<-p.done
	}
}

// mode returns perm as a new file of fsys in dir gets it: under the
// end's umask, learnt on first use.
func (u *umasks) mode(ctx context.Context, fsys FS, dir string, perm fs.FileMode, logf func(string, ...any)) fs.FileMode {
	p := u.start(ctx, fsys, dir, logf)
	<-p.done
	return perm &^ p.mask
}

// probeUmask creates, stats and removes an empty directory in dir, and
// returns the permission bits the end took from it. The directory's name
// is this run's own: whatever step failed, it is removed again, since it
// may have been made although the step said otherwise (a reply lost with
// its connection, a Mkdir repeated on a new one that found it made).
func probeUmask(ctx context.Context, fsys FS, dir string) (fs.FileMode, error) {
	name := fsys.Join(dir, TempName("umask"))
	if p, ok := fsys.(umaskProber); ok {
		mask, err := p.Umask(ctx, name)
		if !errors.Is(err, protocol.ErrNoBatch) {
			if err != nil {
				// Over a live connection; where none is left, the failure
				// that follows says so.
				_ = fsys.Remove(name)
			}
			return mask, err
		}
	}
	if err := fsys.Mkdir(name); err != nil {
		_ = fsys.Remove(name)
		return 0, err
	}
	fi, err := fsys.Stat(name)
	if rerr := fsys.Remove(name); err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	return 0o777 &^ fi.Mode().Perm(), nil
}

// newFileMode returns the mode a new file at dst gets without -p: perm
// under the receiving end's umask.
func (c *copier) newFileMode(ctx context.Context, dst Endpoint, perm fs.FileMode) fs.FileMode {
	return c.umask.mode(ctx, dst.FS, dst.FS.Dir(dst.Path), perm, c.logf)
}

// learnUmask starts learning the umask of dst's end, where a new file at
// dst will need it, so that the answer is there by the time it is.
func (c *copier) learnUmask(ctx context.Context, dst Endpoint) {
	if !c.opts.Preserve {
		c.umask.start(ctx, dst.FS, dst.FS.Dir(dst.Path), c.logf)
	}
}
