package sshconn

import "time"

// TCPStats is what the kernel tells of one TCP connection (TCP_INFO and
// the socket's buffer sizes), in Go units. Counters (Retrans, DSACKDups,
// BytesAcked, BytesReceived, BusyTime, RwndLimited, SndbufLimited) run from
// the connection's start: an interval's share is the difference of two
// readings, which is what LimitedBy looks at.
type TCPStats struct {
	SRTT   time.Duration // smoothed round trip (tcpi_rtt)
	MinRTT time.Duration // smallest round trip seen (tcpi_min_rtt)
	RTTVar time.Duration // its variation (tcpi_rttvar)
	Cwnd   int           // congestion window, in segments
	// Ssthresh is the slow start threshold, in segments: at or above
	// Cwnd the window no longer doubles each round trip. The kernel
	// keeps it at a huge value until the first congestion event.
	Ssthresh int
	Unacked  int // segments sent and not yet acknowledged (tcpi_unacked)
	MSS      int // bytes per segment sent (tcpi_snd_mss)
	// DeliveryRate is the kernel's latest estimate of bytes/s delivered
	// to the peer (tcpi_delivery_rate).
	DeliveryRate float64
	Retrans      int64 // segments retransmitted in all (tcpi_total_retrans)
	// DSACKDups counts segments the peer reported receiving twice
	// (tcpi_dsack_dups, Linux 4.19 on; 0 where the kernel does not
	// tell): retransmits that were not needed, such as tail-loss probes
	// and retransmits of segments only reordered or late. Retrans less
	// DSACKDups is what was lost (RealRetrans).
	DSACKDups int64
	// Lost is the segments presumed lost now (tcpi_lost): a gauge, not
	// a counter; each of them is retransmitted, and counted in Retrans,
	// as the congestion window allows.
	Lost          int
	BytesAcked    int64 // bytes sent and acknowledged
	BytesSent     int64 // bytes sent, retransmissions included (tcpi_bytes_sent)
	BytesReceived int64 // bytes received
	// OutOfOrder counts segments received out of order
	// (tcpi_rcv_ooopack, Linux 5.4 on): on a receiver, each is a hole the
	// sender's loss left, the loss its sender's congestion control backs
	// off from; 0 where the kernel does not tell.
	OutOfOrder int64
	// BusyTime is how long the connection had data in flight
	// (tcpi_busy_time); RwndLimited and SndbufLimited the parts of it that
	// the peer's receive window or the local send buffer held it back
	// (tcpi_rwnd_limited, tcpi_sndbuf_limited).
	BusyTime      time.Duration
	RwndLimited   time.Duration
	SndbufLimited time.Duration
	NotSent       int // bytes in the send buffer not yet sent (tcpi_notsent_bytes)
	PeerWindow    int // the peer's last advertised receive window (tcpi_snd_wnd); 0 where the kernel has none
	RcvWindow     int // the receive window this end advertises (tcpi_rcv_wnd); 0 where the kernel has none
	SndBuf        int // usable send buffer (SO_SNDBUF, halved as granted reports)
	RcvBuf        int // usable receive buffer (SO_RCVBUF)
}

// RealRetrans is how many of the segments s retransmitted the peer did
// not already have: Retrans less the duplicates it reported (DSACK).
// Where the kernel does not tell of duplicates every retransmit counts.
// A duplicate is reported a round trip after its retransmit, so an
// interval's difference of two readings may count a spurious one that
// the next interval's reading takes back.
func (s TCPStats) RealRetrans() int64 { return s.Retrans - s.DSACKDups }

// What limited a connection over an interval, as LimitedBy tells it.
const (
	LimitRwnd   = "rwnd"   // a receive window (the peer's, or this end's when it receives): another connection adds one
	LimitRecv   = "recv"   // this end receives, below its window: what limits the sender is at the far end
	LimitSndbuf = "sndbuf" // the local send buffer: another connection adds one
	LimitLoss   = "loss"   // segments were lost (retransmitted and not reported as duplicates), or arrived out of order at a receiver: congestion control backed off
	LimitCwnd   = "cwnd"   // busy all along with a full congestion window: the path, or its share of it
	LimitApp    = "app"    // none of these: hpncp did not give the connection enough to send
	LimitIdle   = ""       // nothing was sent: no verdict
)

// Thresholds of LimitedBy, as shares of the interval.
const (
	// limitedShare: the receive window or send buffer held the sender
	// back for at least this share of the interval. A quarter is well
	// above the moments any busy sender spends waiting on either, and
	// low enough that a connection held back in bursts, each round trip,
	// is told as such.
	limitedShare = 0.25
	// busyShare: with data in flight for at least this share of the
	// interval and neither window nor buffer to blame, the congestion
	// window is the limit. Below it the connection sat idle waiting for
	// the application.
	busyShare = 0.9
	// receiverShare: an end that received this many times the bytes it
	// sent in the interval is the receiver of a bulk transfer (a
	// download's client). Its own sending (requests, acknowledgements) is
	// never limited, and busy all along as requests keep going out, so
	// the send-side times say nothing of it.
	receiverShare = 4
	// windowFill: a receiver that took in this share of its advertised
	// window every round trip or more is held by that window. Autotuning
	// keeps the window about twice what the sender delivers, so only a
	// window at its limit (tcp_rmem's maximum) gets this full.
	windowFill = 0.8
)

// LimitedBy classifies what limited a connection between two readings
// taken elapsed apart, prev before cur. In order:
//   - "rwnd" or "sndbuf" when the peer's receive window or the send
//     buffer held the sender back for limitedShare of the interval or
//     more (the larger of the two when both);
//   - "loss" when segments were lost in the interval: retransmitted,
//     and not reported back by the peer as received twice (DSACK,
//     RealRetrans). A retransmit the peer did not need (a tail-loss
//     probe after a late acknowledgement, a segment reordered; seen on
//     loopback when the receiving process waits for a CPU) is not a
//     loss: the kernel undoes its congestion window's cut. It comes
//     second: a sender held back by the peer's window sends tail-loss
//     probes while it waits, and those retransmits are not what
//     limited it;
//   - "cwnd" when the connection had data in flight for busyShare of the
//     interval or more: it sent what the congestion window let it;
//   - "app" otherwise: it waited for the application, and more data
//     (streams, requests in flight) rather than connections would help;
//   - "" when it neither sent nor received anything, or the readings are
//     out of order (a connection replaced between them).
//
// An end that received receiverShare times what it sent (a download's
// client) is told apart first: "loss" when segments arrived out of order
// in the interval (holes of the sender's losses, which its congestion
// control backs off from), "rwnd" when what it received per round trip
// filled windowFill of the window it advertises, else "recv": the
// sender's other limits, at the far end, cannot be seen from here.
func LimitedBy(prev, cur TCPStats, elapsed time.Duration) string {
	if elapsed <= 0 || cur.BytesAcked < prev.BytesAcked || cur.BytesReceived < prev.BytesReceived ||
		cur.BusyTime < prev.BusyTime || cur.Retrans < prev.Retrans {
		return LimitIdle
	}
	if cur.BytesAcked == prev.BytesAcked && cur.BytesReceived == prev.BytesReceived {
		return LimitIdle
	}
	sent, received := cur.BytesAcked-prev.BytesAcked, cur.BytesReceived-prev.BytesReceived
	if received >= receiverShare*sent {
		if cur.OutOfOrder > prev.OutOfOrder {
			return LimitLoss
		}
		perRTT := float64(received) * cur.SRTT.Seconds() / elapsed.Seconds()
		if cur.RcvWindow > 0 && cur.SRTT > 0 && perRTT >= windowFill*float64(cur.RcvWindow) {
			return LimitRwnd
		}
		return LimitRecv
	}
	share := func(d time.Duration) float64 { return d.Seconds() / elapsed.Seconds() }
	rwnd := share(cur.RwndLimited - prev.RwndLimited)
	sndbuf := share(cur.SndbufLimited - prev.SndbufLimited)
	switch {
	case rwnd >= limitedShare && rwnd >= sndbuf:
		return LimitRwnd
	case sndbuf >= limitedShare:
		return LimitSndbuf
	case cur.RealRetrans() > prev.RealRetrans():
		return LimitLoss
	case share(cur.BusyTime-prev.BusyTime) >= busyShare:
		return LimitCwnd
	}
	return LimitApp
}
