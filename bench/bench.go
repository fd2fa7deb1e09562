// Package bench measures hpncp against one host: it runs timed uploads and
// downloads of a scratch file under several pipeline configurations (auto,
// HPN disabled, fixed stream counts, the legacy scp protocol), summarises
// them in the table format of the HPN-SSH test reports, recommends the best
// configuration, for the caller to keep in package recommend's per-host
// store. It also holds the embedded demo: an in-process SSH/SFTP server
// behind a relay that emulates a long, rate-limited path.
//
// The transfers go through a Runner; hpncp bench's is Copier, which runs
// the copy a user's command runs (package ends and package transfer), so
// that a table measures what users get.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hpncp/hpncp/internal/recommend"
)

// Config is one configuration of the copy pipeline that a bench compares.
type Config struct {
	// Name is the table's row label: hpn, hpnd, s2, s4, s8, s16 or scp-O.
	Name string `json:"name"`
	// Meaning says what the configuration is, in the flags a user would give.
	Meaning string `json:"meaning"`
	// Streams is --streams: 0 for auto.
	Streams int `json:"streams,omitempty"`
	// HPNDisabled is --hpn-disabled: one stream, the baseline.
	HPNDisabled bool `json:"hpn_disabled,omitempty"`
	// Legacy is -O: the legacy scp protocol.
	Legacy bool `json:"legacy,omitempty"`
}

// Configs are every configuration hpncp bench knows, in table order.
var Configs = []Config{
	{Name: "hpn", Meaning: "--streams auto (the default)"},
	{Name: "hpnd", Meaning: "--hpn-disabled: one stream", HPNDisabled: true},
	{Name: "s2", Meaning: "--streams 2", Streams: 2},
	{Name: "s4", Meaning: "--streams 4", Streams: 4},
	{Name: "s8", Meaning: "--streams 8", Streams: 8},
	{Name: "s16", Meaning: "--streams 16", Streams: 16},
	{Name: "scp-O", Meaning: "-O: legacy scp protocol", Legacy: true},
}

// ParseConfigs turns a comma-separated list of configuration names into
// Configs, in the list's order; "all" means every one.
func ParseConfigs(list string) ([]Config, error) {
	if strings.TrimSpace(list) == "all" {
		return slices.Clone(Configs), nil
	}
	var out []Config
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		i := slices.IndexFunc(Configs, func(c Config) bool { return c.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown configuration %q (known: %s)", name, configNames())
		}
		seen[name] = true
		out = append(out, Configs[i])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no configuration in %q (known: %s)", list, configNames())
	}
	return out, nil
}

func configNames() string {
	names := make([]string, len(Configs))
	for i, c := range Configs {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}

// Direction is upload (local to remote) or download.
type Direction string

const (
	Upload   Direction = "upload"
	Download Direction = "download"
)

// Runner moves the scratch file with one configuration; Copier does it
// with hpncp's own copy, tests with fakes. Paths on the remote side are as
// the host's SFTP server sees them.
type Runner interface {
	Upload(ctx context.Context, c Config, local, remote string) error
	Download(ctx context.Context, c Config, remote, local string) error
	// Remove deletes a remote file; bench calls it for its scratch file.
	Remove(ctx context.Context, remote string) error
}

// StreamCounter is a Runner that can tell the most streams its last
// transfer used, so that an auto configuration's recommendation says
// where its window controller got to.
type StreamCounter interface {
	LastStreams() int
}

// TransferTimer is a Runner whose copies time themselves as scp's and
// rsync's meters time a file: from the connected session to the file in
// place. A run's seconds are then that time, and what the wall clock
// measured beyond it (connecting: TCP, the SSH handshake, authentication,
// the SFTP start; the same work for every configuration) is kept apart.
type TransferTimer interface {
	LastTransfer() time.Duration
}

// Options say what to measure.
type Options struct {
	Size    int64 // bytes in the scratch file
	Runs    int   // transfers per configuration and direction
	Configs []Config
	// RemoteDir is where the scratch file goes on the remote side.
	RemoteDir string
	// Progress, when not nil, hears of each run as it ends (for a terminal).
	Progress func(c Config, d Direction, run int, seconds float64)
}

// Row is one configuration in one direction: every run and their summaries.
type Row struct {
	Config    Config    `json:"config"`
	Direction Direction `json:"direction"`
	Seconds   []float64 `json:"seconds"`
	// MBps are the runs' throughputs in MB/s (10^6 bytes per second).
	MBps        []float64 `json:"mbps"`
	MBpsSummary Summary   `json:"mbps_summary"`
	SecSummary  Summary   `json:"seconds_summary"`
	// Streams are the most streams each run used, when the Runner is a
	// StreamCounter.
	Streams []int `json:"streams,omitempty"`
	// Connect are the seconds each run spent connecting before its copy
	// began, when the Runner is a TransferTimer: not in Seconds.
	Connect        []float64 `json:"connect_seconds,omitempty"`
	ConnectSummary *Summary  `json:"connect_summary,omitempty"`
}

// Report is a whole bench run.
type Report struct {
	Host string `json:"host"`
	// Emulated describes the emulated path of the embedded demo; "" for a
	// real host.
	Emulated       string                    `json:"emulated,omitempty"`
	Size           int64                     `json:"size"`
	Runs           int                       `json:"runs"`
	Rows           []Row                     `json:"rows"`
	Recommendation *recommend.Recommendation `json:"recommendation,omitempty"`
	Measured       time.Time                 `json:"measured"`
}

// Run measures every configuration in both directions. Each run is timed on
// the wall clock, or, when r is a TransferTimer, as its copy timed itself
// (the connection's set-up kept apart in Row.Connect). Before each upload
// the last run's remote scratch file is removed, untimed, as the HPN
// reports' testers did: every upload then creates its file, and none is
// charged for the server freeing the old one's blocks. The scratch files,
// local and remote, are removed before Run returns.
func Run(ctx context.Context, r Runner, host string, o Options) (*Report, error) {
	if o.Size <= 0 || o.Runs <= 0 || len(o.Configs) == 0 {
		return nil, fmt.Errorf("bench %s: need a size, a run count and configurations", host)
	}
	dir, err := os.MkdirTemp("", "hpncp-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench %s: scratch directory: %w", host, err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "scratch")
	if err := writeScratch(src, o.Size); err != nil {
		return nil, fmt.Errorf("bench %s: write scratch file %s: %w", host, src, err)
	}
	var tag [6]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return nil, fmt.Errorf("bench %s: scratch name: %w", host, err)
	}
	remote := ".hpncp-bench-" + hex.EncodeToString(tag[:])
	if o.RemoteDir != "" {
		remote = strings.TrimSuffix(o.RemoteDir, "/") + "/" + remote
	}
	uploaded := false
	defer func() {
		if uploaded {
			// A cancelled bench still cleans up after itself.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = r.Remove(rctx, remote)
		}
	}()

	rep := &Report{Host: host, Size: o.Size, Runs: o.Runs, Measured: time.Now().UTC().Truncate(time.Second)}
	for _, c := range o.Configs {
		up := Row{Config: c, Direction: Upload}
		down := Row{Config: c, Direction: Download}
		for i := range o.Runs {
			if uploaded {
				// Best effort: were it left, the upload replaces it.
				_ = r.Remove(ctx, remote)
			}
			start := time.Now()
			err := r.Upload(ctx, c, src, remote)
			uploaded = true
			if err != nil {
				return nil, fmt.Errorf("bench %s: %s upload to %s: %w", host, c.Name, remote, err)
			}
			up.add(r, time.Since(start), o.Size)
			up.countStreams(r)
			if o.Progress != nil {
				o.Progress(c, Upload, i, up.Seconds[i])
			}
			dst := filepath.Join(dir, "download")
			start = time.Now()
			if err := r.Download(ctx, c, remote, dst); err != nil {
				return nil, fmt.Errorf("bench %s: %s download of %s: %w", host, c.Name, remote, err)
			}
			down.add(r, time.Since(start), o.Size)
			down.countStreams(r)
			if err := checkSize(dst, o.Size); err != nil {
				return nil, fmt.Errorf("bench %s: %s download of %s: %w", host, c.Name, remote, err)
			}
			if err := os.Remove(dst); err != nil {
				return nil, fmt.Errorf("bench %s: remove %s: %w", host, dst, err)
			}
			if o.Progress != nil {
				o.Progress(c, Download, i, down.Seconds[i])
			}
		}
		up.summarize()
		down.summarize()
		rep.Rows = append(rep.Rows, up, down)
	}
	rep.Recommendation = recommendation(host, rep)
	return rep, nil
}

func (r *Row) add(run Runner, wall time.Duration, size int64) {
	d := wall
	if tt, ok := run.(TransferTimer); ok {
		if t := tt.LastTransfer(); t > 0 && t <= wall {
			d = t
			r.Connect = append(r.Connect, (wall - t).Seconds())
		}
	}
	secs := d.Seconds()
	r.Seconds = append(r.Seconds, secs)
	r.MBps = append(r.MBps, float64(size)/secs/1e6)
}

func (r *Row) countStreams(run Runner) {
	if sc, ok := run.(StreamCounter); ok {
		r.Streams = append(r.Streams, sc.LastStreams())
	}
}

func (r *Row) summarize() {
	r.MBpsSummary = summarize(r.MBps)
	r.SecSummary = summarize(r.Seconds)
	if len(r.Connect) > 0 {
		c := summarize(r.Connect)
		r.ConnectSummary = &c
	}
}

func checkSize(path string, want int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() != want {
		return fmt.Errorf("got %d bytes, want %d", fi.Size(), want)
	}
	return nil
}

// writeScratch writes size bytes of noise: incompressible, so that no
// layer's compression flatters a configuration.
func writeScratch(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		f.Close()
		return err
	}
	_, err = io.CopyN(f, mrand.NewChaCha8(seed), size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// recommendation picks the configuration with the best median throughput,
// uploads and downloads weighed alike. The legacy protocol is a yardstick,
// not something later copies should switch to, so it is never picked.
func recommendation(host string, rep *Report) *recommend.Recommendation {
	score := map[string]float64{}
	used := map[string]int{} // the most streams a configuration's runs used
	var order []Config
	for _, row := range rep.Rows {
		if row.Config.Legacy {
			continue
		}
		if _, ok := score[row.Config.Name]; !ok {
			order = append(order, row.Config)
		}
		score[row.Config.Name] += row.MBpsSummary.Median / 2
		for _, n := range row.Streams {
			used[row.Config.Name] = max(used[row.Config.Name], n)
		}
	}
	if len(order) == 0 {
		return nil
	}
	best := order[0]
	for _, c := range order[1:] {
		if score[c.Name] > score[best.Name] {
			best = c
		}
	}
	rec := &recommend.Recommendation{
		Host:        host,
		Config:      best.Name,
		Streams:     best.Streams,
		HPNDisabled: best.HPNDisabled,
		MBps:        score[best.Name],
		Measured:    rep.Measured,
	}
	if best.Streams == 0 && !best.HPNDisabled {
		rec.StartStreams = used[best.Name]
	}
	return rec
}
