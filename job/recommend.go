package job

import (
	"context"

	"github.com/hpncp/hpncp/internal/recommend"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// RecommendationKey is the store's key for l (internal/recommend): the
// user, host name and port its connection goes to, resolved as the dial
// resolves them (ssh -G, with -F, -o, -P and the operand's own user and
// port), so that every alias of one destination finds the same
// measurement.
func RecommendationKey(ctx context.Context, c Conn, l transfer.Location) (string, error) {
	so := c.ssh()
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

// RecommendationFor is the recommendation stored for l's destination, or
// one stored, by an hpncp from before destinations were resolved, under
// the host name as typed. A destination that cannot be resolved has none:
// the dial reports why.
func RecommendationFor(ctx context.Context, c Conn, l transfer.Location) (recommend.Recommendation, bool) {
	key, err := RecommendationKey(ctx, c, l)
	if err != nil {
		return recommend.Recommendation{}, false
	}
	if r, ok := recommend.Load(key); ok {
		return r, true
	}
	return recommend.Load(l.Host)
}
