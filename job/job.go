// Package job is what one run of hpncp is, under the command line: a
// copy (Copy), an rsync-style sync (Sync), a remote shell (RunShell), each
// from one value that holds the operands, the flags' meanings, the
// tuning and the hooks that report the run. It turns the flags' meanings
// into the engine's settings (the window controller's configuration and
// the congestion control policy, tune.go), decides how the run starts
// (connections dialed ahead, sessions and files opened ahead, windows
// warmed: start.go), sets up the resume journal and the sessions a run
// will need, and for a sync lists, plans and applies (sync.go). It has
// the ends opened by package ends and copies with package transfer; the
// CLI and hpncp bench run their copies through it, so that a benchmark
// measures the start users get.
package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hpncp/hpncp/ends"
	"github.com/hpncp/hpncp/internal/starttrace"
	"github.com/hpncp/hpncp/pipeline"
	"github.com/hpncp/hpncp/sshconn"
	"github.com/hpncp/hpncp/transfer"
)

// Conn is how a run reaches its hosts: ssh's flags, with ssh's meaning.
// A location's own user and port (user@host, scp://host:port) win over
// User and Port.
type Conn struct {
	ConfigFile    string   // -F
	Options       []string // -o Key=Value
	Port          int      // -P (scp), -p (ssh); 0 for the configuration's
	User          string
	Identities    []string // -i
	Jump          string   // -J
	Ciphers       string   // -c
	AddressFamily string   // "inet" (-4), "inet6" (-6) or ""
	// Batch never prompts (-B); otherwise passwords and passphrases are
	// asked on the terminal.
	Batch bool
	// Logf, when not nil, receives the connection steps (-v); Warnf the
	// warnings ssh would print; Banner the server's banner.
	Logf, Warnf func(format string, args ...any)
	Banner      func(message string)
}

// ssh is c as sshconn takes it.
func (c Conn) ssh() sshconn.Options {
	o := sshconn.Options{ConfigFile: c.ConfigFile, Options: c.Options, Port: c.Port, User: c.User,
		Identities: c.Identities, JumpHosts: c.Jump, Ciphers: c.Ciphers, AddressFamily: c.AddressFamily,
		BatchMode: c.Batch, Logf: c.Logf, Warnf: c.Warnf, Banner: c.Banner}
	if !c.Batch {
		o.Prompter = sshconn.TerminalPrompter()
	}
	return o
}

// Job is one copy: every location but the last copied to the last.
type Job struct {
	Locations []transfer.Location
	// Options are the copy's own options as the flags give them
	// (recursion, -p, skip mode, links, tar mode as asked for, file
	// list, shard, verification, resume) with the hooks that report it
	// (Progress, Report, Logf, Trace). Parallel, Limiter and ResumeDir
	// are the job's to set, from Tuning, Limit and the environment; tar
	// mode is turned off where it cannot apply (tarMode).
	Options transfer.Options
	Conn    Conn
	Legacy  bool // -O: the legacy scp protocol for every remote end
	// Delta sends a file whose target exists by rsync's delta transfer
	// through the helper Helper says (--delta); trees then go file by
	// file, not as tar streams.
	Delta  bool
	Helper DeltaHelper
	Tuning Tuning
	Limit  int64 // bytes per second over the whole run; 0 for none
	// TraceStart traces the start, from the dial to the first byte, and
	// has Result.StartSummary count its round trips (-v).
	TraceStart bool
	// Started, when not nil, is called once the ends are open, as the
	// copy begins: the moment Result.Took counts from.
	Started func()
}

// Result is what a copy did.
type Result struct {
	// Engine is the copy's own result; nil when it did not start (an
	// option refused, a host not reached).
	Engine *transfer.Result
	// Took is the copy's time from its connected ends on, as scp's and
	// rsync's meters time a file: the connection's set-up is the same
	// whatever the copy does after it.
	Took time.Duration
	// Legacy says the copy went over the legacy scp protocol: -O was
	// given or a host has no SFTP server.
	Legacy bool
	// Lost, after a failure, is the error of a connection given up
	// because its server stopped responding (ends.Hosts.Lost): the copy's
	// own error says only that its streams, or a re-dial, failed.
	Lost error
	// StartSummary is the -v line that counts the start's round trips
	// (TraceStart); "" when none.
	StartSummary string
}

// Copy runs j. The result is never nil; an error before the copy started
// leaves its Engine nil, and errors about the options are
// *transfer.OptionError.
func Copy(ctx context.Context, j Job) (*Result, error) {
	out := &Result{}
	locs := j.Locations
	upload := uploads(locs)
	tune, err := j.Tuning.settings(upload)
	if err != nil {
		return out, err
	}
	to := j.Options
	to.Tar = tarMode(to, j.Legacy, j.Tuning.HPNDisabled || j.Delta)
	to.Parallel = tune.parallel
	to.Limiter = pipeline.NewLimiter(j.Limit)

	var trace *starttrace.Trace
	if j.TraceStart {
		trace = starttrace.New(0)
		ctx = starttrace.With(ctx, trace)
	}
	warm, warmFirst := warms(locs, to.Parallel, to.Recursive)
	hosts := ends.New(ends.Options{SSH: j.Conn.ssh(), Legacy: j.Legacy, RcvBuf: tune.rcvbuf, SndBuf: tune.sndbuf,
		CC: tune.cc, CCBestEffort: tune.ccBestEffort, Predial: predial(locs, to.Parallel, to.Recursive && !j.Legacy),
		PreOpen: preOpen(locs, to.Recursive), PreCreate: preCreate(locs, to, to.Recursive || j.Legacy),
		Warm: warm, WarmFirst: warmFirst})
	defer hosts.Close()
	defer hosts.AbortOnCancel(ctx)()
	if j.Delta || to.Verify || to.Skip == transfer.SkipChecksum {
		// A helper at a remote end hashes there for --verify and
		// --checksum, and (--delta) rebuilds files from deltas.
		logf := func(string, ...any) {}
		if to.Logf != nil {
			logf = to.Logf
		}
		to.Helper = hosts.DeltaHosts(j.Helper.lines(logf))
		if j.Delta {
			to.Delta = to.Helper
			to.Compress = to.Tar.Compress // -C
		}
	}
	run, err := hosts.Open(ctx, locs, to)
	if err != nil {
		return out, err
	}
	if to.Tar.Compress && run.Options.Tar.Mode == transfer.TarOff && !j.Delta && to.Logf != nil {
		to.Logf("-C compresses tar streams and deltas only; this copy uses neither")
	}
	start := time.Now()
	if j.Started != nil {
		j.Started()
	}
	res, err := run.Copy(ctx)
	out.Engine, out.Took, out.Legacy = res, time.Since(start), run.Legacy
	if (err != nil || len(res.Errors) > 0) && !errors.Is(err, context.Canceled) {
		out.Lost = hosts.Lost()
	}
	out.StartSummary = trace.Summary()
	return out, err
}

// tarMode is the tar mode of a copy asked for o.Tar: automatic tar mode
// is off where it cannot apply (legacy scp, --verify, --files-from,
// --hpn-disabled, --resume); --tar is left for Options.Validate to refuse.
func tarMode(o transfer.Options, legacy, hpnDisabled bool) transfer.TarOptions {
	t := o.Tar
	if t.Mode == transfer.TarAuto && (legacy || o.Verify || o.FilesFrom != nil || hpnDisabled || o.Resume || o.InPlace) {
		t.Mode = transfer.TarOff
	}
	return t
}

// Remove deletes l, connecting to its host (hpncp bench's scratch file).
func Remove(ctx context.Context, c Conn, l transfer.Location) error {
	hosts := ends.New(ends.Options{SSH: c.ssh()})
	defer hosts.Close()
	e, err := hosts.Endpoint(ctx, l)
	if err != nil {
		return err
	}
	if err := e.FS.Remove(e.Path); err != nil {
		return fmt.Errorf("remove %s%s: %w", l.HostLabel(), l.Path, err)
	}
	return nil
}
