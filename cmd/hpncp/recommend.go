package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hpncp/hpncp/internal/recommend"
	"github.com/hpncp/hpncp/job"
	"github.com/hpncp/hpncp/transfer"
)

// noCacheEnv, when set to anything but "" or "0", keeps copies from
// starting from a stored bench recommendation, for scripts that want the
// same start on every machine.
const noCacheEnv = "HPNCP_NO_CACHE"

// useRecommendation makes a copy's window controller start from what
// hpncp bench found best for the first remote destination that has a
// stored recommendation (job.RecommendationFor), when no pipeline flag was
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
		r, ok := job.RecommendationFor(ctx, o.conn(io.Discard), l)
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
