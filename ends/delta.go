package ends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/delta"
	"github.com/hpncp/hpncp/helper"
	"github.com/hpncp/hpncp/internal/filter"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/protocol"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// deltaHost is a host's delta service: channels running hpncp serve
// --delta on its first connection, kept while idle for the next file.
type deltaHost struct {
	c    *sshconn.Client
	host string
	line string
	// conns, when not nil, are the destination's connections up so far
	// (c among them), and more says when another comes up: new
	// channels go on each in turn, so that the shares of a delta
	// (transfer.DeltaShares), and the files of a run, have the windows
	// and buffers of several.
	conns func() ([]*sshconn.Client, <-chan struct{})

	// started is closed once the helper started early (startDelta) is
	// up or has failed; line and noneErr are set by then. walks are the
	// walks asked of it ahead (WalkAhead), under mu.
	started chan struct{}
	walks   map[walkKey]*walkAhead
	// walked, when not nil, is closed once the walks asked ahead are
	// answered and their channel idle: a session asked for meanwhile
	// waits for it rather than start another helper (the lister asks
	// for one to take its walk's answer).
	walked chan struct{}
	logf   func(format string, args ...any) // -vv, or nil

	mu      sync.Mutex
	idle    []*helper.DeltaClient
	opened  int   // channels opened: the next goes on the connection after
	noneErr error // why no helper answered: every file goes whole then
	// coming are the channels opened ahead for a push's shares still
	// coming up (opening); arrived is closed, and made anew, as each
	// has come up or failed.
	coming  int
	arrived chan struct{}
	// ahead, when not nil, is the signature of the push asked ahead
	// (PushAhead), coming in parts on those channels; the push of its
	// file takes it (signedFor).
	ahead  *signedAhead
	closed bool // the run is over: a channel coming up is closed
}

// DeltaHosts are the hosts' delta services for a copy (transfer.Options.
// Delta): line says what runs the helper's delta service on a host, with
// extra (when not "") among its arguments, or why none is to run there.
//
// Each host's helper is started on its first connection as soon as that
// is up (startDelta), beside the SFTP start: on a long path its channel,
// command and greeting are several round trips, which a sync's walk of
// the remote tree, or its first delta, would otherwise wait for after
// the SFTP start's own.
func (h *Hosts) DeltaHosts(line func(host, extra string) (string, error)) transfer.DeltaHosts {
	h.mu.Lock()
	h.deltaLine = line
	h.mu.Unlock()
	return deltaHosts{h: h, line: line}
}

// startDelta starts host's helper on c, its first connection, when the
// run has asked for helpers; the end's first DeltaSession waits for it.
// The trees WalkAhead named for the destination key are walked on it
// straight away, the first asked for in the helper's command line: its
// answer follows the hello, a round trip sooner than a request sent
// once the helper is up.
func (h *Hosts) startDelta(ctx context.Context, c *sshconn.Client, host, key string, conns func() ([]*sshconn.Client, <-chan struct{})) {
	h.mu.Lock()
	line := h.deltaLine
	if line == nil || h.early[c] != nil {
		h.mu.Unlock()
		return
	}
	dh := &deltaHost{c: c, host: host, conns: conns, opened: 1, started: make(chan struct{}), walks: map[walkKey]*walkAhead{}, logf: h.opts.SSH.Logf}
	if len(h.walkAhead[key]) > 0 {
		dh.walked = make(chan struct{})
	}
	asks := h.walkAhead[key]
	pull := h.pullAhead[key] // none: path ""
	if len(asks) > 1 {
		// The walks after the first are requests, which would give the
		// pull up: it is asked for when the copy comes to it.
		pull = pullAsk{}
	}
	push := h.pushAhead[key] // none: path ""
	if len(asks) > 0 || push.shares < 2 {
		// The command line carries the walk; or no other share's
		// channel is there to sign.
		push = pushAsk{}
	}
	if push.path != "" {
		if dh.ahead = newSignedAhead(min(push.shares-1, signAheadParts)); dh.ahead == nil {
			push = pushAsk{}
		}
	}
	// The channels a delta's other shares go on, opened with the first.
	shares := 0
	switch {
	case pull.path != "":
		shares = pull.shares
	case push.path != "":
		shares = push.shares
	}
	answers := make([]*walkAhead, len(asks))
	for i, a := range asks {
		answers[i] = &walkAhead{done: make(chan struct{})}
		dh.walks[a.key()] = answers[i]
	}
	h.early[c] = dh
	h.mu.Unlock()
	h.bg.Go(func() {
		l, err := line(host, "")
		dh.line, dh.noneErr = l, err
		var first *helper.DeltaClient
		asked := ""
		if err == nil && len(asks) > 0 {
			asked = helper.WalkArg(asks[0].root, asks[0].maxEntries, asks[0].prune)
		}
		if err != nil {
			dh.ahead.failAll(err)
		}
		if err == nil {
			firstLine := l
			if asked != "" {
				firstLine, err = line(host, asked)
			}
			if push.path != "" && dh.logf != nil {
				dh.logf("%s: asked the helpers to sign %s in %d parts as the SFTP start goes on", host, vis.String(push.path), len(dh.ahead.paths))
			}
			if err == nil {
				// A pull asked ahead goes out behind the command
				// that starts the helper, and its other shares'
				// behind the commands of channels of their own,
				// opened at once: they are idle with it once the
				// helper is up. A push's basis signed ahead has its
				// other shares' channels opened so too, idle until
				// the push has the helper make its file.
				sctx, cancel := context.WithCancel(ctx) // its signing ends with the run
				stop := context.AfterFunc(h.aborted, cancel)
				log := delta.SignLog(func(w io.Writer) error {
					defer func() { stop(); cancel() }()
					return pull.sign(sctx, w)
				})
				var opening sync.WaitGroup
				var more []*helper.DeltaClient
				var moreMu sync.Mutex
				var asked atomic.Bool
				firstUp := make(chan struct{})
				if push.path != "" {
					dh.mu.Lock()
					dh.coming, dh.arrived = shares-1, make(chan struct{})
					dh.mu.Unlock()
				}
				for i := 1; i < shares; i++ {
					opening.Go(func() {
						li, signs := l, false
						if push.path != "" && i-1 < len(dh.ahead.paths) {
							// Its part of the signature is asked
							// for in its command line.
							li, signs = dh.ahead.line(i-1, line, host, l, push)
						}
						c, err := dh.open(ctx, dh.apart(ctx, i, firstUp), li, func(c *helper.DeltaClient) {
							if dh.askPull(c, pull, delta.Share{N: pull.shares, I: i}, log.CopyTo) {
								asked.Store(true)
							}
						})
						if push.path != "" {
							switch {
							case !signs: // not one that signs, or its part failed already
							case err != nil:
								dh.ahead.fail(i-1, err)
							default:
								c.ReadSignedAhead(dh.ahead.parts, func(p string) { dh.ahead.signed(i-1, p) })
							}
							// Idle as soon as it is up, under the
							// first, which the push takes.
							dh.opening(c)
							return
						}
						if err == nil {
							moreMu.Lock()
							more = append(more, c)
							moreMu.Unlock()
						}
					})
				}
				share := delta.ShareOf(pull.shares, 0)
				first, err = dh.open(ctx, dh.c, firstLine, func(c *helper.DeltaClient) {
					if dh.askPull(c, pull, share, log.CopyTo) {
						asked.Store(true)
					}
				})
				close(firstUp)
				if push.path == "" {
					opening.Wait()
				}
				if !asked.Load() {
					log.Unused()
					stop()
					cancel()
				}
				for _, c := range more {
					dh.releaser(c)()
				}
			}
			if err != nil && ctx.Err() == nil {
				dh.noneErr = err
			}
		}
		if first == nil || len(asks) == 0 {
			if first != nil {
				dh.releaser(first)()
			}
			close(dh.started)
			for _, w := range answers {
				w.err = errors.New("no helper")
				close(w.done)
			}
			if dh.walked != nil {
				close(dh.walked)
			}
			return
		}
		// Files ask for channels of their own meanwhile; the walks go
		// on this one, one after another, and leave it idle.
		close(dh.started)
		for i, a := range asks {
			w := answers[i]
			if i == 0 && asked != "" {
				w.dirs, w.errs, w.err = first.WalkAsked(ctx, a.root, a.maxEntries, a.maxBytes, a.prune)
			} else {
				w.dirs, w.errs, w.err = first.Walk(ctx, a.root, a.maxEntries, a.maxBytes, a.prune)
			}
			close(w.done)
		}
		dh.releaser(first)()
		close(dh.walked)
	})
}

// WalkAhead has the helper of l's host, once it is up, walk the tree at
// root (the path its end will give, as a sync's lister asks), with the
// limits and the pruning given: the lister's walk of it then takes that
// answer rather than asking and waiting, on a long path, for the SFTP
// start first. Call it before the host's end is opened; it does nothing
// unless DeltaHosts was asked for.
func (h *Hosts) WalkAhead(l transfer.Location, root string, maxEntries, maxBytes int, prune filter.Prune) {
	key, _ := h.destination(l)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.walkAhead == nil {
		h.walkAhead = map[string][]walkAsk{}
	}
	h.walkAhead[key] = append(h.walkAhead[key], walkAsk{root, maxEntries, maxBytes, prune})
}

// PullAhead has the helper of l's host, once it is up, diff the file at
// path (the path its end will give the copy) against the basis sign
// signs, before the file is listed, as the sync of one remote file into a
// local one can ask: the signature goes out at once, and the delta waits
// in the channel until the copy, having listed the file and found it
// changed, asks for its delta (DiffStream of the same path, made in place
// or not as inPlace says, compressed as compress says), which then
// follows without the round trips of a request, the first of them spent
// in the SFTP start. A copy that asks for none leaves it to the
// channel's end; one that asks for another file's, or for anything else,
// first, has the channel given up and asks on a new one (session.again).
// sign's ctx ends with the run. Call it before the host's end is opened;
// it does nothing unless DeltaHosts was asked for.
func (h *Hosts) PullAhead(l transfer.Location, path string, inPlace, compress bool, shares int, sign func(ctx context.Context, w io.Writer) error) {
	key, _ := h.destination(l)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pullAhead == nil {
		h.pullAhead = map[string]pullAsk{}
	}
	h.pullAhead[key] = pullAsk{path, inPlace, compress, shares, sign}
}

// PushAhead has l's host's helpers sign, as they start, the file at path
// (the destination its end will give the copy), or the file named name
// in it where that is a directory: the basis of the push of one local
// file of size bytes, modified at mtime, as the sync of one local file
// into a remote one makes, before the copy has listed it. The channels
// the push's other shares go on (shares in all, transfer.DeltaShares of
// size, the target most likely of about the source's) are opened with
// the first helper's, and the helper of each signs a part of the
// signature and sends it at once (helper.SignAheadArg): the push of that
// file, once the copy has looked and found it changed, diffs against
// the parts as they come, and asks its own helper for none (signedFor).
// A copy that pushes nothing, or something else, leaves them: the
// helpers' reads of the file are their cost; a file with the source's
// size and time, which the copy's quick check passes, is not read. Call
// it before the host's end is opened; it does nothing unless DeltaHosts
// was asked for.
func (h *Hosts) PushAhead(l transfer.Location, path, name string, size int64, mtime time.Time, shares int) {
	key, _ := h.destination(l)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pushAhead == nil {
		h.pushAhead = map[string]pushAsk{}
	}
	h.pushAhead[key] = pushAsk{path, name, size, mtime, shares}
}

// signAheadParts is the most parts a push's signature asked for ahead
// comes in, each signed by a helper of its own (on a channel of the
// push's other shares) and sent over its connection.
const signAheadParts = 3

// signedAhead is a push's basis's signature asked for ahead (PushAhead),
// in parts, each on a channel of the push's other shares, and the paths
// of the files their helpers signed.
type signedAhead struct {
	parts *delta.SignatureParts
	mu    sync.Mutex
	paths []string
	told  []bool
	left  int           // parts whose path is not told yet
	all   chan struct{} // closed once every part's is
	taken bool          // a push has looked at it
}

func newSignedAhead(n int) *signedAhead {
	parts, err := delta.NewSignatureParts(n)
	if err != nil {
		return nil
	}
	return &signedAhead{parts: parts, paths: make([]string, n), told: make([]bool, n), left: n, all: make(chan struct{})}
}

// line is the command of the channel that signs part i of the push p:
// the helper's line with the request (signs), or l, the part failed,
// where it cannot carry it.
func (a *signedAhead) line(i int, line func(host, extra string) (string, error), host, l string, p pushAsk) (li string, signs bool) {
	arg := helper.SignAheadArg(p.path, p.name, p.size, p.mtime, delta.Share{N: len(a.paths), I: i})
	if arg == "" {
		a.fail(i, errors.New("the sign-ahead's request is too long for a command line"))
		return l, false
	}
	li, err := line(host, arg)
	if err != nil {
		a.fail(i, err)
		return l, false
	}
	return li, true
}

// signed is told the path part i was signed from ("" for none).
func (a *signedAhead) signed(i int, p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.told[i] {
		return
	}
	a.told[i], a.paths[i] = true, p
	if a.left--; a.left == 0 {
		close(a.all)
	}
}

// fail fails part i, which will not come.
func (a *signedAhead) fail(i int, err error) {
	a.parts.Fail(err)
	a.signed(i, "")
}

// failAll fails every part: no helper is there to sign them.
func (a *signedAhead) failAll(err error) {
	if a == nil {
		return
	}
	for i := range a.paths {
		a.fail(i, err)
	}
}

// signedFor is the signature asked ahead, for the push of basis, of
// basisSize bytes: the first push only, and only where every part was
// signed from that file, of that size. It waits for the parts' paths,
// which come as their channels come up.
func (d *deltaHost) signedFor(ctx context.Context, basis string, basisSize int64) *delta.SignatureParts {
	a := d.ahead
	if a == nil {
		return nil
	}
	a.mu.Lock()
	taken := a.taken
	a.taken = true
	a.mu.Unlock()
	if taken {
		return nil
	}
	select {
	case <-a.all:
	case <-ctx.Done():
		return nil
	}
	for _, p := range a.paths {
		if p == "" || path.Clean(p) != path.Clean(basis) {
			return nil
		}
	}
	if size, err := a.parts.Size(ctx); err != nil || size != basisSize {
		return nil
	}
	if d.logf != nil {
		d.logf("%s: the signature of %s came ahead, in %d parts", d.host, vis.String(basis), len(a.paths))
	}
	return a.parts
}

// A pushAsk is a push's basis asked to be signed ahead (PushAhead).
type pushAsk struct {
	path, name string // path "" for none
	size       int64
	mtime      time.Time
	shares     int
}

// A pullAsk is a pull asked for ahead (PullAhead).
type pullAsk struct {
	path              string // "" for none
	inPlace, compress bool
	shares            int // how many shares of its delta are asked for (transfer.DeltaShares)
	sign              func(ctx context.Context, w io.Writer) error
}

// askPull asks c, a helper started early, for its share of the pull
// asked ahead, if one was, signed by sign: c then goes idle with it on
// its way, and sign is called.
func (d *deltaHost) askPull(c *helper.DeltaClient, p pullAsk, share delta.Share, sign func(io.Writer) error) (asked bool) {
	if p.path == "" {
		return false
	}
	c.Compress(p.compress)
	if err := c.DiffAhead(p.path, sign, p.inPlace, share); err != nil {
		return false // the channel is given up; the copy asks again
	}
	if d.logf != nil {
		d.logf("%s: asked the helper for the delta of %s as the SFTP start goes on", d.host, vis.String(p.path))
	}
	return true
}

// A walkAsk is a walk asked for ahead; a walkAhead its answer, once done
// is closed.
type (
	walkAsk struct {
		root                 string
		maxEntries, maxBytes int
		prune                filter.Prune
	}
	// walkKey is a walkAsk as a map's key.
	walkKey struct {
		root                 string
		maxEntries, maxBytes int
		prune                string
	}
	walkAhead struct {
		done chan struct{}
		dirs map[string][]fs.FileInfo
		errs map[string]string
		err  error
	}
)

func (a walkAsk) key() walkKey {
	return walkKey{a.root, a.maxEntries, a.maxBytes, a.prune.Key()}
}

// walkedAhead takes the answer to a walk asked for ahead, if there was one.
func (d *deltaHost) walkedAhead(ctx context.Context, a walkAsk) (dirs map[string][]fs.FileInfo, errs map[string]string, ok bool, err error) {
	d.mu.Lock()
	w := d.walks[a.key()]
	delete(d.walks, a.key())
	d.mu.Unlock()
	if w == nil {
		return nil, nil, false, nil
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return nil, nil, true, ctx.Err()
	}
	if w.err != nil {
		return nil, nil, false, nil // asked again, to say why
	}
	if d.logf != nil {
		d.logf("%s: the helper walked %s as the SFTP start went on", d.host, vis.String(a.root))
	}
	return w.dirs, w.errs, true, nil
}

// session is a helper's client, whose walks take an answer asked for
// ahead where there is one.
type session struct {
	*helper.DeltaClient
	dh *deltaHost
}

// SignPatch is the helper's, with the attributes as this end's copy
// gives them.
func (s session) SignPatch(ctx context.Context, basis string, basisSize int64, tmp, final string, size int64, a protocol.PutAttrs, shares transfer.PushShares,
	diff func(*delta.Signature, func(context.Context, int64) (*delta.Signature, error), io.Writer) error) (st delta.Stats, made fs.FileInfo, err error) {
	err = s.again(ctx, func(c *helper.DeltaClient) error {
		var err error
		var signed *delta.SignatureParts
		if shares.N > 1 && tmp != "" {
			signed = s.dh.signedFor(ctx, basis, basisSize)
		}
		st, made, err = c.SignPatchShares(ctx, basis, basisSize, tmp, size,
			helper.Attrs{SetMode: a.SetMode, Mode: a.Mode, SetTimes: a.SetTimes, Atime: a.Atime, Mtime: a.Mtime, RenameTo: final},
			helper.Shares{N: shares.N, Others: shares.Others, Signed: signed}, diff)
		return err
	})
	return st, made, err
}

// PatchShare is the helper's.
func (s session) PatchShare(ctx context.Context, basis string, basisSize int64, tmp string, size int64, under bool, sh delta.Share, send func(w io.Writer) error) (st delta.Stats, err error) {
	err = s.again(ctx, func(c *helper.DeltaClient) error {
		var err error
		st, err = c.PatchShare(ctx, basis, basisSize, tmp, size, under, sh, send)
		return err
	})
	return st, err
}

// DiffStream is the helper's, but for a pull asked ahead on s's channel
// (PullAhead), whose delta the copy of the same file takes.
func (s session) DiffStream(ctx context.Context, p string, size int64, sign func(io.Writer) error, inPlace bool, share delta.Share, apply func(io.Reader) error) (st delta.Stats, err error) {
	err = s.again(ctx, func(c *helper.DeltaClient) error {
		// The path as the copy gives it, cleaned, may be the one asked
		// ahead; the client checks the rest.
		p := p
		ahead, _, asked := c.Ahead()
		if asked && path.Clean(ahead) == path.Clean(p) {
			p = ahead
		}
		var err error
		st, err = c.DiffStream(ctx, p, size, sign, inPlace, share, apply)
		if asked && err == nil && s.dh.logf != nil {
			s.dh.logf("%s: the delta of %s was asked for ahead", s.dh.host, vis.String(p))
		}
		return err
	})
	return st, err
}

// AheadShare is the share of the pull of the file at p asked ahead on
// s's channel, if one was.
func (s session) AheadShare(p string) (delta.Share, bool) {
	ahead, share, asked := s.DeltaClient.Ahead()
	return share, asked && path.Clean(ahead) == path.Clean(p)
}

// again has ask ask s's helper; where that gave the channel up for a
// pull asked ahead on it (helper.ErrAheadUnused: ask is another file's
// pull, or one made another way, or another request), it asks again on
// a new channel. Every request a session makes goes through it.
func (s session) again(ctx context.Context, ask func(*helper.DeltaClient) error) error {
	err := ask(s.DeltaClient)
	if !errors.Is(err, helper.ErrAheadUnused) {
		return err
	}
	c, err := s.dh.openNext(ctx)
	if err != nil {
		return err
	}
	defer s.dh.releaser(c)()
	c.Compress(s.DeltaClient.Compressing())
	return ask(c)
}

func (s session) Walk(ctx context.Context, root string, maxEntries, maxBytes int, prune filter.Prune) (dirs map[string][]fs.FileInfo, errs map[string]string, err error) {
	if dirs, errs, ok, err := s.dh.walkedAhead(ctx, walkAsk{root, maxEntries, maxBytes, prune}); ok {
		return dirs, errs, err
	}
	err = s.again(ctx, func(c *helper.DeltaClient) error {
		var err error
		dirs, errs, err = c.Walk(ctx, root, maxEntries, maxBytes, prune)
		return err
	})
	return dirs, errs, err
}

func (s session) Sums(ctx context.Context, paths []string, sizes []int64) (sums []delta.RangeSum, errs []error, err error) {
	err = s.again(ctx, func(c *helper.DeltaClient) error {
		var err error
		sums, errs, err = c.Sums(ctx, paths, sizes)
		return err
	})
	return sums, errs, err
}

func (s session) SHA256s(ctx context.Context, paths []string, sizes []int64) (sums [][]byte, errs []error, err error) {
	err = s.again(ctx, func(c *helper.DeltaClient) error {
		var err error
		sums, errs, err = c.SHA256s(ctx, paths, sizes)
		return err
	})
	return sums, errs, err
}

func (s session) FollowSHA256(ctx context.Context, path string, size int64, written <-chan int64) (sum []byte, err error) {
	err = s.again(ctx, func(c *helper.DeltaClient) error {
		var err error
		sum, err = c.FollowSHA256(ctx, path, size, written)
		return err
	})
	return sum, err
}

type deltaHosts struct {
	h    *Hosts
	line func(host, extra string) (string, error)
}

func (d deltaHosts) DeltaSession(ctx context.Context, end transfer.FS) (transfer.DeltaSession, func(), error) {
	d.h.mu.Lock()
	dh := d.h.delta[end]
	if dh == nil {
		f, ok := d.h.first[end]
		if !ok {
			d.h.mu.Unlock()
			return nil, nil, errors.New("no connection to run a helper on")
		}
		if dh = d.h.early[f.c]; dh == nil {
			dh = &deltaHost{c: f.c, host: f.host, conns: f.conns}
			line, err := d.line(f.host, "")
			dh.line, dh.noneErr = line, err
		}
		d.h.delta[end] = dh
	}
	d.h.mu.Unlock()
	for _, ready := range []chan struct{}{dh.started, dh.walked} {
		if ready == nil {
			continue
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return dh.take(ctx)
}

// take returns an idle client, or, while channels opened ahead are
// coming up, the first of them up, or one on a new channel.
func (d *deltaHost) take(ctx context.Context) (transfer.DeltaSession, func(), error) {
	d.mu.Lock()
	for {
		if err := d.noneErr; err != nil {
			d.mu.Unlock()
			return nil, nil, err
		}
		if n := len(d.idle); n > 0 {
			c := d.idle[n-1]
			d.idle = d.idle[:n-1]
			d.mu.Unlock()
			return session{c, d}, d.releaser(c), nil
		}
		if d.coming == 0 {
			break
		}
		arrived := d.arrived
		d.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		d.mu.Lock()
	}
	d.mu.Unlock()
	c, err := d.openNext(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.mu.Lock()
			d.noneErr = err
			d.mu.Unlock()
		}
		return nil, nil, err
	}
	return session{c, d}, d.releaser(c), nil
}

func (d *deltaHost) releaser(c *helper.DeltaClient) func() {
	return func() {
		if c.Broken() {
			c.Close()
			return
		}
		d.mu.Lock()
		d.idle = append(d.idle, c)
		d.mu.Unlock()
	}
}

// opening takes a channel opened ahead for a push's shares (coming) as
// it has come up (c), or failed (nil): idle under the others, so that
// the first channel, whose helper signs the push's basis, is taken
// first.
func (d *deltaHost) opening(c *helper.DeltaClient) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.coming--
	close(d.arrived)
	d.arrived = make(chan struct{})
	switch {
	case c == nil:
	case d.closed:
		c.Close()
	default:
		d.idle = append([]*helper.DeltaClient{c}, d.idle...)
	}
}

func (d *deltaHost) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.idle {
		c.Close()
	}
	d.idle = nil
	d.closed = true
}

// next is the connection the next channel opened goes on: each of the
// destination's connections up in turn.
func (d *deltaHost) next() *sshconn.Client {
	if d.conns == nil {
		return d.c
	}
	cs, _ := d.conns()
	d.mu.Lock()
	i := d.opened
	d.opened++
	d.mu.Unlock()
	if len(cs) == 0 {
		return d.c
	}
	return cs[i%len(cs)]
}

// openNext opens a channel on the next connection (next), or, where that
// fails, on the first: a connection lost, which the SFTP end will have
// dialed again, is not a reason to have no helper.
func (d *deltaHost) openNext(ctx context.Context) (*helper.DeltaClient, error) {
	on := d.next()
	c, err := d.open(ctx, on, d.line, nil)
	if err != nil && on != d.c && ctx.Err() == nil {
		c, err = d.open(ctx, d.c, d.line, nil)
	}
	return c, err
}

// apart is the connection for share i of a pull asked ahead as the
// helper starts on the first: the destination's connection i (the
// first being 0) once it is up, or, when no other has come up by the
// time firstUp is closed (the helper is up on the first), the one of
// those up in turn.
func (d *deltaHost) apart(ctx context.Context, i int, firstUp <-chan struct{}) *sshconn.Client {
	if d.conns == nil {
		return d.c
	}
	for {
		cs, more := d.conns()
		if len(cs) > i {
			return cs[i]
		}
		select {
		case <-more:
			continue
		case <-firstUp:
		case <-ctx.Done():
		}
		if len(cs) == 0 {
			return d.c
		}
		return cs[i%len(cs)]
	}
}

// open runs the delta service on a new channel on c, started by line;
// first, when not nil, asks its first request before the helper's hello
// is in (helper.StartDeltaClient).
func (d *deltaHost) open(ctx context.Context, on *sshconn.Client, line string, first func(*helper.DeltaClient)) (*helper.DeltaClient, error) {
	ch, reqs, err := on.OpenChannel("session", nil)
	if err != nil {
		return nil, &sshconn.Error{Op: "open session on", Host: d.host, Err: err}
	}
	go ssh.DiscardRequests(reqs)
	for _, kv := range on.Config.Environment(os.Environ()) {
		ch.SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{kv[0], kv[1]}))
	}
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{line}))
	if err == nil && !ok {
		err = errors.New("the server refused it")
	}
	if err != nil {
		ch.Close()
		return nil, &sshconn.Error{Op: "start the helper on", Host: d.host, Err: err}
	}
	// The helper's stderr: what a shell says where there is none.
	stderr := &boundedBuffer{max: 4096}
	stderrDone := make(chan struct{})
	go func() { io.Copy(stderr, ch.Stderr()); close(stderrDone) }()
	c, err := helper.StartDeltaClient(ctx, ch, first)
	if err != nil {
		ch.Close()
		<-stderrDone
		msg := strings.TrimSpace(stderr.String())
		if m, ok := helper.CheckFailed(msg); ok {
			msg = m
		}
		if msg != "" {
			err = fmt.Errorf("%w (%s)", err, vis.String(msg))
		}
		return nil, fmt.Errorf("no helper on %s: %w", d.host, err)
	}
	return c, nil
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.b.Len(); room > 0 {
		b.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
