package job

import (
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
	"github.com/hpncp/hpncp/window"
)

// Tuning is what the pipeline flags ask for, read.
type Tuning struct {
	// Streams and Conns are --streams and --connections: a fixed count,
	// or 0 for the window controller's (auto).
	Streams, Conns int
	// HPNDisabled is --hpn-disabled: one stream on one connection, the
	// stock pipeline's shape.
	HPNDisabled bool
	// Chunk is the bytes one stream reads or writes at a time (--chunk);
	// Window the bytes each stream keeps in flight (--window), 0 for the
	// controller's.
	Chunk  int
	Window int64
	// RcvBuf and SndBuf are the TCP socket buffers of every connection
	// (--tcp-rcvbuf, --tcp-sndbuf); 0 leaves the kernel's autotuning.
	RcvBuf, SndBuf int
	// CC is --cc: "auto" (AutoCC's choice for the copy's direction),
	// "system", or an algorithm's name.
	CC string
	// StartStreams is the controller's first stream count, from a
	// stored bench recommendation; 0 for its own guess.
	StartStreams int
}

// ValidCongestion reports whether name can be a congestion control
// algorithm's name (--cc).
func ValidCongestion(name string) bool { return sshconn.ValidCongestionName(name) }

// settings are a tuning's values as the engine and the ends take them.
type settings struct {
	parallel       transfer.ParallelOptions
	rcvbuf, sndbuf int
	// cc is the congestion control the copy's connections get, "" for
	// the system's; auto is AutoCC's choice for the copy's direction,
	// which may be tried and given up (ccBestEffort).
	cc           string
	ccBestEffort bool
}

// settings are t's for a copy whose data this host sends (upload) or
// receives.
func (t Tuning) settings(upload bool) (settings, error) {
	s := settings{rcvbuf: t.RcvBuf, sndbuf: t.SndBuf}
	chunk := t.Chunk
	if chunk == 0 {
		chunk = DefaultChunk
	}
	s.parallel.Chunk = chunk
	s.parallel.MinSize = 4 * int64(chunk)
	if t.Window > 0 {
		s.parallel.Depth = int((t.Window + int64(chunk) - 1) / int64(chunk))
	}
	switch t.CC {
	case "system":
	case "auto", "":
		s.cc, s.ccBestEffort = AutoCC(upload)
	default:
		if !ValidCongestion(t.CC) {
			return s, &transfer.OptionError{Msg: "--cc " + t.CC + ": not a congestion control algorithm's name",
				Hint: "name one of net.ipv4.tcp_available_congestion_control, or auto, or system"}
		}
		s.cc = t.CC
	}
	streams, conns := t.Streams, t.Conns
	if t.HPNDisabled {
		// One stream, one connection, no controller decisions: the stock
		// pipeline's shape, kept full (requests in flight across chunks)
		// as OpenSSH's sftp client keeps its requests in flight.
		streams, conns = 1, 1
	}
	// What one connection's socket buffers carry bounds it as surely as
	// its channels' windows do: on stock kernels (tcp_wmem max 4 MiB) a
	// long path needs several connections from the start.
	cfg := window.Config{Fixed: streams, MaxConns: conns, Start: t.StartStreams,
		ConnBytes: sshconn.ConnBytes(t.RcvBuf, t.SndBuf)}
	if streams > 0 && conns > 0 {
		cfg.StreamsPerConn = (streams + conns - 1) / conns
	}
	if s.cc == "bbr" && conns == 0 {
		// A lossy path's plan takes more connections than another's
		// because each loss cuts a cubic connection's window for
		// seconds; bbr's is not cut, and an upload's extra connections
		// only added a slow one at its end, which no second copy can
		// overtake.
		cfg.LossyConns, cfg.LossyMaxConns = window.DefaultMaxConns, window.DefaultMaxConns
	}
	s.parallel.Controller = func() *window.Controller { return window.New(cfg) }
	return s, nil
}

// DefaultChunk is --chunk's default: the bytes a stream moves at once.
const DefaultChunk = 1 << 20

// AutoCC is the congestion control --cc auto gives a copy's connections,
// as ends.Options.CC and CCBestEffort: bbr where the kernel lets this
// user set it, for a copy whose connections send the data (an upload);
// bbr holds its rate through random loss and fills a long path without
// waiting for loss to find its size, where cubic halves at each loss. A
// receiver's algorithm governs only its acknowledgements: a download
// keeps the system's. The kernel is asked first: an ordinary user on a
// stock kernel (tcp_allowed_congestion_control "reno cubic") may not set
// bbr, and the copy is then planned as the system's algorithm it runs
// (a lossy upload takes cubic's connections, not bbr's), not as bbr.
func AutoCC(upload bool) (cc string, bestEffort bool) {
	if upload && canSetCongestion("bbr") {
		return "bbr", true
	}
	return "", false
}

// canSetCongestion is sshconn.CanSetCongestion; the tests stand in for
// the kernel's answer.
var canSetCongestion = sshconn.CanSetCongestion
