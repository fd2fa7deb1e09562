package ends

import (
	"time"

	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/window"
)

// ConnSampler returns a reader of the TCP state of every connection of
// the run, for one copy's window samples (pipeline.ParallelOptions.Conns):
// each call covers the interval since the one before, which it needs to
// tell what limited each connection. Connections the kernel tells nothing
// of (closed ones, or anything but Linux TCP) are left out.
func (h *Hosts) ConnSampler() func() []window.ConnSample {
	type reading struct {
		st sshconn.TCPStats
		at time.Time
	}
	prev := map[*sshconn.Client]reading{}
	return func() []window.ConnSample {
		h.mu.Lock()
		clients := append([]*sshconn.Client(nil), h.clients...)
		h.mu.Unlock()
		var out []window.ConnSample
		for i, c := range clients {
			st, ok := sshconn.TCPInfo(c.Transport)
			if !ok {
				continue
			}
			now := time.Now()
			cs := window.ConnSample{Conn: i, SRTT: st.SRTT, MinRTT: st.MinRTT, Cwnd: st.Cwnd,
				DeliveryRate: st.DeliveryRate, NotSent: st.NotSent, SndBuf: st.SndBuf, PeerWindow: st.PeerWindow,
				Lost: st.Lost}
			if p, ok := prev[c]; ok {
				cs.LimitedBy = sshconn.LimitedBy(p.st, st, now.Sub(p.at))
				cs.Retrans = max(0, st.Retrans-p.st.Retrans)
				cs.Spurious = min(cs.Retrans, max(0, st.DSACKDups-p.st.DSACKDups))
				cs.Bytes = max(0, st.BytesAcked-p.st.BytesAcked) + max(0, st.BytesReceived-p.st.BytesReceived)
			}
			prev[c] = reading{st, now}
			out = append(out, cs)
		}
		return out
	}
}
