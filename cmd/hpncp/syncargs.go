package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hpncp/hpncp/internal/units"
	"github.com/hpncp/hpncp/job"
)

// syncOptions are hpncp sync's flags: rsync's, with rsync's meanings.
type syncOptions struct {
	archive                                           bool
	recursive, links, perms, times, group, owner      bool
	devices, specials, hardLinks, sparse, safeLinks   bool
	verbose                                           int
	quiet, compress, dryRun, update, checksum         bool
	itemize                                           bool
	delete, deleteExcluded                            bool
	maxDelete                                         int
	sizeOnly, ignoreTimes, ignoreExisting, existing   bool
	minSize, maxSize                                  int64
	removeSource, partial, stats, progress, progress2 bool
	bwlimit                                           string
	rsh                                               string
	filesFrom                                         string
	from0                                             bool
	numericIDs                                        bool
	humanReadable                                     int
	help                                              bool
	explicitR                                         bool // -r itself, not -a's

	// wholeFile is -W: files go whole, never as deltas.
	wholeFile bool
	// inPlace is --inplace: a delta rewrites its target where it lies.
	inPlace bool
	// appendMode is --append or --append-verify (the same in hpncp).
	appendMode bool

	// hpncp's own, which rsync does not have.
	json, verify                  bool
	helper, helperPath, helperDir string

	// filters are the --exclude, --include, --filter and *-from rules in
	// the order given: the first that matches a name decides.
	filters []filterArg

	operands []string
}

// filterArg is one filter flag as given.
type filterArg struct {
	flag, value string
}

// syncFlag is one of rsync's flags hpncp sync knows.
type syncFlag struct {
	long  string
	short byte
	// valued flags take an argument: --name=V, --name V, -xV or -x V.
	valued bool
	set    func(o *syncOptions, v string) error
}

// on returns a setter that turns on the booleans ps.
func on(ps ...func(o *syncOptions) *bool) func(*syncOptions, string) error {
	return func(o *syncOptions, _ string) error {
		for _, p := range ps {
			*p(o) = true
		}
		return nil
	}
}

func filterFlag(name string) func(*syncOptions, string) error {
	return func(o *syncOptions, v string) error {
		o.filters = append(o.filters, filterArg{name, v})
		return nil
	}
}

func sizeFlag(name string, p func(o *syncOptions) *int64) func(*syncOptions, string) error {
	return func(o *syncOptions, v string) error {
		n, err := units.ParseSize(v)
		if err != nil || n < 0 {
			return syncUsagef("", "--%s=%s: want a size such as 100K, 10M or 1G", name, v)
		}
		*p(o) = n
		return nil
	}
}

var syncFlags = []syncFlag{
	{long: "archive", short: 'a', set: on(func(o *syncOptions) *bool { return &o.archive })},
	{long: "recursive", short: 'r', set: on(func(o *syncOptions) *bool { return &o.recursive }, func(o *syncOptions) *bool { return &o.explicitR })},
	{long: "links", short: 'l', set: on(func(o *syncOptions) *bool { return &o.links })},
	{long: "perms", short: 'p', set: on(func(o *syncOptions) *bool { return &o.perms })},
	{long: "times", short: 't', set: on(func(o *syncOptions) *bool { return &o.times })},
	{long: "group", short: 'g', set: on(func(o *syncOptions) *bool { return &o.group })},
	{long: "owner", short: 'o', set: on(func(o *syncOptions) *bool { return &o.owner })},
	{short: 'D', set: on(func(o *syncOptions) *bool { return &o.devices }, func(o *syncOptions) *bool { return &o.specials })},
	{long: "devices", set: on(func(o *syncOptions) *bool { return &o.devices })},
	{long: "specials", set: on(func(o *syncOptions) *bool { return &o.specials })},
	{long: "hard-links", short: 'H', set: on(func(o *syncOptions) *bool { return &o.hardLinks })},
	{long: "sparse", short: 'S', set: on(func(o *syncOptions) *bool { return &o.sparse })},
	{long: "safe-links", set: on(func(o *syncOptions) *bool { return &o.safeLinks })},
	{long: "verbose", short: 'v', set: func(o *syncOptions, _ string) error { o.verbose++; return nil }},
	{long: "quiet", short: 'q', set: on(func(o *syncOptions) *bool { return &o.quiet })},
	{long: "compress", short: 'z', set: on(func(o *syncOptions) *bool { return &o.compress })},
	{long: "dry-run", short: 'n', set: on(func(o *syncOptions) *bool { return &o.dryRun })},
	{long: "update", short: 'u', set: on(func(o *syncOptions) *bool { return &o.update })},
	{long: "checksum", short: 'c', set: on(func(o *syncOptions) *bool { return &o.checksum })},
	{long: "itemize-changes", short: 'i', set: on(func(o *syncOptions) *bool { return &o.itemize })},
	{long: "delete", set: on(func(o *syncOptions) *bool { return &o.delete })},
	{long: "delete-after", set: on(func(o *syncOptions) *bool { return &o.delete })},
	{long: "delete-excluded", set: on(func(o *syncOptions) *bool { return &o.delete }, func(o *syncOptions) *bool { return &o.deleteExcluded })},
	{long: "max-delete", valued: true, set: func(o *syncOptions, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return syncUsagef("", "--max-delete=%s: want a number of files", v)
		}
		if n < 0 {
			n = 0
		}
		o.maxDelete = n
		return nil
	}},
	{long: "size-only", set: on(func(o *syncOptions) *bool { return &o.sizeOnly })},
	{long: "ignore-times", short: 'I', set: on(func(o *syncOptions) *bool { return &o.ignoreTimes })},
	{long: "ignore-existing", set: on(func(o *syncOptions) *bool { return &o.ignoreExisting })},
	{long: "existing", set: on(func(o *syncOptions) *bool { return &o.existing })},
	{long: "min-size", valued: true, set: sizeFlag("min-size", func(o *syncOptions) *int64 { return &o.minSize })},
	{long: "max-size", valued: true, set: sizeFlag("max-size", func(o *syncOptions) *int64 { return &o.maxSize })},
	{long: "remove-source-files", set: on(func(o *syncOptions) *bool { return &o.removeSource })},
	{long: "partial", set: on(func(o *syncOptions) *bool { return &o.partial })},
	{short: 'P', set: on(func(o *syncOptions) *bool { return &o.partial }, func(o *syncOptions) *bool { return &o.progress })},
	{long: "progress", set: on(func(o *syncOptions) *bool { return &o.progress })},
	{long: "info", valued: true, set: func(o *syncOptions, v string) error {
		for _, w := range strings.Split(v, ",") {
			switch strings.ToLower(w) {
			case "progress2":
				o.progress2 = true
			case "progress", "progress1":
				o.progress = true
			case "progress0", "none", "":
				o.progress, o.progress2 = false, false
			default:
				return syncUsagef("hpncp sync knows --info=progress2 (and progress, progress0)", "--info=%s is not supported", w)
			}
		}
		return nil
	}},
	{long: "stats", set: on(func(o *syncOptions) *bool { return &o.stats })},
	{long: "bwlimit", valued: true, set: func(o *syncOptions, v string) error { o.bwlimit = v; return nil }},
	{long: "rsh", short: 'e', valued: true, set: func(o *syncOptions, v string) error { o.rsh = v; return nil }},
	{long: "exclude", valued: true, set: filterFlag("exclude")},
	{long: "include", valued: true, set: filterFlag("include")},
	{long: "exclude-from", valued: true, set: filterFlag("exclude-from")},
	{long: "include-from", valued: true, set: filterFlag("include-from")},
	{long: "filter", short: 'f', valued: true, set: filterFlag("filter")},
	{long: "files-from", valued: true, set: func(o *syncOptions, v string) error { o.filesFrom = v; return nil }},
	{long: "from0", short: '0', set: on(func(o *syncOptions) *bool { return &o.from0 })},
	{long: "numeric-ids", set: on(func(o *syncOptions) *bool { return &o.numericIDs })},
	{long: "human-readable", short: 'h', set: func(o *syncOptions, _ string) error { o.humanReadable++; return nil }},
	{long: "help", set: on(func(o *syncOptions) *bool { return &o.help })},
	{long: "json", set: on(func(o *syncOptions) *bool { return &o.json })},
	{long: "whole-file", short: 'W', set: on(func(o *syncOptions) *bool { return &o.wholeFile })},
	{long: "no-whole-file", set: func(o *syncOptions, _ string) error { o.wholeFile = false; return nil }},
	{long: "inplace", set: on(func(o *syncOptions) *bool { return &o.inPlace })},
	{long: "append", set: on(func(o *syncOptions) *bool { return &o.appendMode })},
	{long: "append-verify", set: on(func(o *syncOptions) *bool { return &o.appendMode })},
	{long: "helper", valued: true, set: func(o *syncOptions, v string) error {
		switch v {
		case job.HelperAuto, job.HelperNever:
		case job.HelperInstall:
			return syncUsagef("install it first: hpncp helper install HOST", "--helper=install is for hpncp ssh; hpncp sync uses a helper already there")
		default:
			return syncUsagef("", "--helper=%s: want auto or never", v)
		}
		o.helper = v
		return nil
	}},
	{long: "helper-path", valued: true, set: func(o *syncOptions, v string) error {
		if v == "" {
			return syncUsagef("", "--helper-path needs the helper's command at the far end")
		}
		o.helperPath = v
		return nil
	}},
	{long: "helper-dir", valued: true, set: func(o *syncOptions, v string) error {
		if err := job.CheckHelperDir(v); err != nil {
			return syncUsagef("the helpers' directory on the server is absolute or under ~/", "--helper-dir: %v", err)
		}
		o.helperDir = v
		return nil
	}},
	{long: "verify", set: on(func(o *syncOptions) *bool { return &o.verify })},
}

// refusedSyncFlags are rsync flags people use that hpncp sync does not
// do, with why, so that one given is an error naming it.
var refusedSyncFlags = map[string]string{
	"acls":             "SFTP carries no ACLs",
	"A":                "SFTP carries no ACLs",
	"xattrs":           "SFTP carries no extended attributes",
	"X":                "SFTP carries no extended attributes",
	"copy-links":       "hpncp sync copies links as links (-l) or leaves them out",
	"L":                "hpncp sync copies links as links (-l) or leaves them out",
	"relative":         "not supported yet: give the directory to copy as the source",
	"R":                "not supported yet: give the directory to copy as the source",
	"backup":           "not supported",
	"b":                "not supported",
	"link-dest":        "not supported",
	"compare-dest":     "not supported",
	"copy-dest":        "not supported",
	"daemon":           "hpncp talks to sshd, not to an rsync daemon",
	"rsync-path":       "hpncp needs no rsync on the server: leave it out",
	"delete-before":    "hpncp deletes after the transfer (--delete-after); leave it out or use --delete",
	"delete-during":    "hpncp deletes after the transfer (--delete-after); leave it out or use --delete",
	"delete-delay":     "hpncp deletes after the transfer (--delete-after); leave it out or use --delete",
	"force":            "hpncp sync replaces a directory by another type only with --delete",
	"one-file-system":  "not supported",
	"x":                "not supported",
	"cvs-exclude":      "not supported: give the patterns with --exclude",
	"C":                "not supported: give the patterns with --exclude",
	"checksum-choice":  "hpncp picks its sums: SHA-256, or XXH3-128 both ends with a helper",
	"modify-window":    "not supported: times are compared to the second",
	"temp-dir":         "hpncp writes every file beside its target",
	"T":                "hpncp writes every file beside its target",
	"fuzzy":            "hpncp's deltas take the target of the same name as their basis",
	"y":                "hpncp's deltas take the target of the same name as their basis",
	"chmod":            "not supported",
	"chown":            "not supported",
	"usermap":          "not supported",
	"groupmap":         "not supported",
	"omit-dir-times":   "not supported",
	"O":                "not supported",
	"prune-empty-dirs": "not supported",
	"m":                "not supported",
	"keep-dirlinks":    "not supported",
	"K":                "not supported",
	"copy-dirlinks":    "not supported",
	"k":                "not supported",
	"executability":    "not supported",
	"E":                "not supported",
	"timeout":          "use -o ServerAliveInterval=N in -e 'ssh ...'",
	"contimeout":       "use -o ConnectTimeout=N in -e 'ssh ...'",
	"port":             "that is an rsync daemon's port: give ssh's with -e 'ssh -p N'",
	"list-only":        "use -n -i to see what would be copied",
	"mkpath":           "not supported: the destination's parent must exist",
	"super":            "not supported",
	"fake-super":       "not supported",
	"no-implied-dirs":  "not supported",
	"ignore-errors":    "hpncp never deletes after a failed listing",
	"log-file":         "use --json for a report of the run",
	"out-format":       "hpncp sync prints rsync's -i format; use --json for a report",
}

const syncHint = "run hpncp sync --help for the flags hpncp sync knows"

// parseSyncArgs reads hpncp sync's command line as rsync's: short flags
// bundle (-avz), a valued one takes the rest of its word or the next
// word (-e ssh, -essh), long flags take --name=V or --name V, "--" ends
// the flags, and flags may follow operands.
func parseSyncArgs(args []string) (*syncOptions, error) {
	o := &syncOptions{maxDelete: -1}
	long := map[string]*syncFlag{}
	short := map[byte]*syncFlag{}
	for i := range syncFlags {
		f := &syncFlags[i]
		if f.long != "" {
			long[f.long] = f
		}
		if f.short != 0 {
			short[f.short] = f
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			o.operands = append(o.operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, v, hasV := strings.Cut(a[2:], "=")
			f := long[name]
			if f == nil {
				if why, ok := refusedSyncFlags[name]; ok {
					return nil, syncUsagef(why, "rsync flag --%s is not supported by hpncp sync", name)
				}
				if strings.HasPrefix(name, "no-") {
					if g := long[name[3:]]; g != nil && !g.valued {
						if err := o.unset(name[3:]); err != nil {
							return nil, err
						}
						continue
					}
				}
				return nil, syncUsagef(syncHint, "unknown flag --%s", name)
			}
			switch {
			case f.valued && !hasV:
				if i+1 >= len(args) {
					return nil, syncUsagef(syncHint, "flag --%s needs a value", name)
				}
				i++
				v = args[i]
			case !f.valued && hasV:
				return nil, syncUsagef(syncHint, "flag --%s takes no value", name)
			}
			if err := f.set(o, v); err != nil {
				return nil, err
			}
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				f := short[c]
				if f == nil {
					if why, ok := refusedSyncFlags[string(c)]; ok {
						return nil, syncUsagef(why, "rsync flag -%c is not supported by hpncp sync", c)
					}
					return nil, syncUsagef(syncHint, "unknown flag -%c", c)
				}
				if !f.valued {
					if err := f.set(o, ""); err != nil {
						return nil, err
					}
					continue
				}
				v := a[j+1:]
				if v == "" {
					if i+1 >= len(args) {
						return nil, syncUsagef(syncHint, "flag -%c needs a value", c)
					}
					i++
					v = args[i]
				}
				if err := f.set(o, v); err != nil {
					return nil, err
				}
				break
			}
		default:
			o.operands = append(o.operands, a)
		}
	}
	if o.archive {
		o.recursive, o.links, o.perms, o.times, o.group, o.owner, o.devices, o.specials = true, true, true, true, true, true, true, true
	}
	// rsync -h alone is its help; with anything else it is
	// --human-readable.
	if o.humanReadable > 0 && len(args) == 1 {
		o.help = true
	}
	return o, nil
}

// unset is --no-NAME for a flag that takes no value.
func (o *syncOptions) unset(name string) error {
	switch name {
	case "recursive":
		o.recursive = false
	case "links":
		o.links = false
	case "perms":
		o.perms = false
	case "times":
		o.times = false
	case "group":
		o.group = false
	case "owner":
		o.owner = false
	case "devices":
		o.devices = false
	case "specials":
		o.specials = false
	case "verbose":
		o.verbose = 0
	case "compress":
		o.compress = false
	case "hard-links":
		o.hardLinks = false
	case "sparse":
		o.sparse = false
	default:
		return syncUsagef(syncHint, "unknown flag --no-%s", name)
	}
	return nil
}

// rshOptions reads an -e command for its ssh flags: hpncp makes its own
// connections, with the flags ssh would have been given. A command that
// is not ssh (or hpncp ssh), or an ssh flag hpncp cannot honour, is an
// error naming it.
func (o *syncOptions) rshOptions(c *copyOptions) error {
	if o.rsh == "" {
		return nil
	}
	words := job.SplitWords(o.rsh)
	if len(words) == 0 {
		return syncUsagef("", "-e: empty remote shell command")
	}
	prog := filepath.Base(words[0])
	rest := words[1:]
	switch {
	case prog == "ssh" || prog == "hpnssh":
	case prog == "hpncp" && len(rest) > 0 && rest[0] == "ssh":
		rest = rest[1:]
	default:
		return syncUsagef("hpncp sync connects as ssh would; give -e 'ssh [flags]'",
			"-e %s: hpncp sync reads the remote shell's ssh flags, and %s is not ssh", o.rsh, words[0])
	}
	so, err := parseSSHArgs(append(append([]string{}, rest...), "hpncp-sync-host"))
	if err != nil {
		return fmt.Errorf("-e %s: %w", o.rsh, err)
	}
	if so.Host != "hpncp-sync-host" || len(so.Command) > 0 || so.Subsystem || so.NoCommand || so.PrintConfig || so.Version {
		return syncUsagef("give only ssh's connection flags in -e", "-e %s: not a remote shell command hpncp sync can read", o.rsh)
	}
	if so.Port != 0 {
		c.Port = int64(so.Port)
	}
	c.Identities = append(c.Identities, so.Identities...)
	if so.ConfigFile != "" {
		c.ConfigFile = so.ConfigFile
	}
	c.SSHOptions = append(c.SSHOptions, so.SSHOptions...)
	if so.User != "" {
		c.SSHOptions = append(c.SSHOptions, "User="+so.User)
	}
	if so.Jump != "" {
		c.Jump = so.Jump
	}
	if so.Cipher != "" {
		c.Cipher = so.Cipher
	}
	switch so.AddressFamily {
	case "inet":
		c.IPv4 = true
	case "inet6":
		c.IPv6 = true
	}
	c.Verbose = c.Verbose || so.Verbose
	return nil
}
