package ends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/hpncp/hpncp/helper"
	"github.com/hpncp/hpncp/internal/vis"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// deltaHost is a host's delta service: channels running hpncp serve
// --delta on its first connection, kept while idle for the next file.
type deltaHost struct {
	c    *sshconn.Client
	host string
	line string

	mu      sync.Mutex
	idle    []*helper.DeltaClient
	noneErr error // why no helper answered: every file goes whole then
}

// DeltaHosts are the hosts' delta services for a copy (transfer.Options.
// Delta): line says what runs the helper's delta service on a host, or
// why none is to run there.
func (h *Hosts) DeltaHosts(line func(host string) (string, error)) transfer.DeltaHosts {
	return deltaHosts{h: h, line: line}
}

type deltaHosts struct {
	h    *Hosts
	line func(host string) (string, error)
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
		dh = &deltaHost{c: f.c, host: f.host}
		line, err := d.line(f.host)
		dh.line, dh.noneErr = line, err
		d.h.delta[end] = dh
	}
	d.h.mu.Unlock()
	return dh.take(ctx)
}

// take returns an idle client, or one on a new channel.
func (d *deltaHost) take(ctx context.Context) (transfer.DeltaSession, func(), error) {
	d.mu.Lock()
	if err := d.noneErr; err != nil {
		d.mu.Unlock()
		return nil, nil, err
	}
	if n := len(d.idle); n > 0 {
		c := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		return c, d.releaser(c), nil
	}
	d.mu.Unlock()
	c, err := d.open(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.mu.Lock()
			d.noneErr = err
			d.mu.Unlock()
		}
		return nil, nil, err
	}
	return c, d.releaser(c), nil
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

func (d *deltaHost) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.idle {
		c.Close()
	}
	d.idle = nil
}

// open runs the delta service on a new channel.
func (d *deltaHost) open(ctx context.Context) (*helper.DeltaClient, error) {
	ch, reqs, err := d.c.OpenChannel("session", nil)
	if err != nil {
		return nil, &sshconn.Error{Op: "open session on", Host: d.host, Err: err}
	}
	go ssh.DiscardRequests(reqs)
	for _, kv := range d.c.Config.Environment(os.Environ()) {
		ch.SendRequest("env", false, ssh.Marshal(struct{ Name, Value string }{kv[0], kv[1]}))
	}
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{d.line}))
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
	c, err := helper.NewDeltaClient(ctx, ch)
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
