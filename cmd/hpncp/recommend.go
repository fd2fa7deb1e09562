package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hpncp/hpncp/internal/recommend"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// noCacheEnv, when set to anything but "" or "0", keeps copies from
// starting from a stored bench recommendation, for scripts that want the
// same start on every machine.
const noCacheEnv = "HPNCP_NO_CACHE"

// useRecommendation makes a copy's window controller start from what
// hpncp bench found best for the first remote destination that has a
// stored recommendation (recommendationFor), when no pipeline flag was
// given (o.fromCache): an
// explicit --streams, --connections or --hpn-disabled, or HPNCP_NO_CACHE,
// overrides it. The controller still probes and trims from that start:
// a fixed count that won, the streams auto got to when auto won, one
// stream when one plain stream did.
func (o *copyOptions) useRecommendation(ctx context.Context, locs []transfer.Location, stderr io.Writer) {
	if !o.fromCache || o.Legacy {
		return
	}
	if v := os.Getenv(noCacheEnv); v != "" && v != "0" {
		return
	}
	if !recommend.Any() {
		// Nothing stored: no need to ask ssh -G where the hosts are.
		return
	}
	for _, l := range locs {
		if !l.Remote() {
			continue
		}
		r, ok := recommendationFor(ctx, o.connOptions(io.Discard), l)
		if !ok {
			continue
		}
		streams := r.Streams
		switch {
		case r.HPNDisabled:
			streams = 1
		case streams == 0:
			streams = r.StartStreams
		}
		if o.Verbose {
			fmt.Fprintf(stderr, "hpncp: %s has a bench recommendation (%s, %.1f MB/s, measured %s): %s; --streams, --connections or --hpn-disabled override it\n",
				l.Host, r.Config, r.MBps, r.Measured.Format("2006-01-02"), startText(streams))
		}
		o.startStreams = streams
		return
	}
}

func startText(streams int) string {
	if streams == 0 {
		return "the window controller starts as it would without one"
	}
	if streams == 1 {
		return "the window controller starts from 1 stream"
	}
	return fmt.Sprintf("the window controller starts from %d streams", streams)
}

// recommendationKey is the store's key for l: the user, host name and
// port its connection goes to, resolved as the dial resolves them (ssh -G,
// with -F, -o, -P and the operand's own user and port), so that every
// alias of one destination finds the same measurement.
func recommendationKey(ctx context.Context, so sshconn.Options, l transfer.Location) (string, error) {
	if l.User != "" {
		so.User = l.User
	}
	if l.Port != 0 {
		so.Port = l.Port
	}
	// The dial resolves it again and says what it found: once is enough.
	so.Logf, so.Warnf = nil, nil
	cfg, err := sshconn.Resolve(ctx, l.Host, so)
	if err != nil {
		return "", err
	}
	return recommend.Key(cfg.User, cfg.HostName, cfg.Port), nil
}

// recommendationFor is the recommendation stored for l's destination, or
// one stored, by an hpncp from before destinations were resolved, under
// the host name as typed. A destination that cannot be resolved has none:
// the dial reports why.
func recommendationFor(ctx context.Context, so sshconn.Options, l transfer.Location) (recommend.Recommendation, bool) {
	key, err := recommendationKey(ctx, so, l)
	if err != nil {
		return recommend.Recommendation{}, false
	}
	if r, ok := recommend.Load(key); ok {
		return r, true
	}
	return recommend.Load(l.Host)
}
