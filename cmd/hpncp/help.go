package main

// usageText is the usage lines, which hpncp given nothing to copy prints on
// stderr.
const usageText = `Usage:
  hpncp [flags] SOURCE... TARGET
  hpncp sync [rsync flags] SRC... DEST    rsync's command line and semantics
  hpncp ssh [ssh flags] [user@]host [command...]
  hpncp helper status|install|remove host the helper hpncp ssh stripes through
  hpncp bench [flags] [user@]host[:dir]   measure configurations, keep the best
  hpncp bench --embedded                  the demo: an emulated 50 ms path
  hpncp report merge [-o FILE] REPORT...  one --json report of a job's shards
  hpncp trace plot [-o OUT.svg] TRACE     draw a copy's --trace file as SVG
  hpncp version
`

// helpText is hpncp's --help. It is a template for the CLI library, so it
// must not contain double braces.
const helpText = `hpncp copies files and directory trees over SSH, with scp's syntax, to and
from any OpenSSH server (it speaks SFTP), using large buffers and pipelined
requests.

` + usageText + `
hpncp sync makes DEST match SRC with rsync's flags and meanings (-a, -n -i,
--delete, --exclude, ...) on the same engine (see hpncp sync --help).
hpncp ssh is a remote shell with ssh's flags for rsync -e, git and scripts
(see hpncp ssh --help), also installable as hpnssh. A subcommand is one only
as the first word: after a flag or an operand, sync, ssh, bench, report and
version are operands (hpncp -r bench h: copies a directory named bench), and
so is version with operands after it (hpncp version h: copies a file), and
trace where a local file of that name exists and plot does not follow it.

SOURCE and TARGET are local paths or remote ones:
  [user@]host:path         path relative to the remote home unless absolute
  [user@][v6addr]:path     an IPv6 address
  scp://[user@]host[:port][/path]
A colon after a slash is part of a local name: ./a:b is a local file.

Examples:
  hpncp bigfile host:/data/             copy one file into a remote directory
  hpncp -r host:/results .              fetch a tree
  hpncp -rp photos/ alice@nas:backup/   a tree, keeping modes and times
  hpncp -P 2222 -i ~/.ssh/id_work f h:  another port and key
  hpncp -J bastion report.pdf inner:    through a jump host
  hpncp -rp --shard 2/8 --json data/ h:d/   one of 8 machines' share, as JSON

Flags (scp's, with scp's meaning):
  -r            copy directories recursively
  -p            preserve modes and access and modification times
  -q            quiet: no progress bar
  -v            verbose: connection steps and each file, on stderr
  -B            batch mode: never ask for passwords or passphrases
  -P port       port to connect to
  -i file       identity (private key) file; may be repeated
  -F file       ssh_config file to read instead of ~/.ssh/config
  -o Key=Value  any ssh_config option; may be repeated
  -J host[,h2]  connect through jump hosts
  -l limit      limit bandwidth, in Kbit/s as scp's (1 Kbit = 1024 bits)
  -c cipher     cipher(s) to use, comma-separated
  -O            use the legacy SCP protocol (automatic for a host without SFTP)
  -3            copies between two remotes go through this host (always so)
  -4, -6        use IPv4 or IPv6 only
  -h, --help    show this help and copy nothing; hpncp -h ssh (or bench)
                shows that subcommand's help
  --version     print hpncp's version, as hpncp version does

Pipeline flags (large files go over several SFTP streams and connections):
  --streams N|auto       streams per large file; auto probes (default)
  --connections N|auto   SSH connections the streams spread over
  --hpn-disabled         one stream, plain pipeline: the baseline
  --chunk SIZE           bytes a stream moves at a time [1MiB]
  --window auto|BYTES    bytes each stream keeps in flight; auto (default)
                         is the controller's: its share of 1.25 times the
                         BDP, from half a channel window (2 MiB) to one;
                         on a lossy path its share of twice the BDP
  --tcp-rcvbuf SIZE      TCP receive buffer (default: kernel autotuning)
  --tcp-sndbuf SIZE      TCP send buffer (default: kernel autotuning)
  --cc auto|system|NAME  TCP congestion control of hpncp's connections:
                         auto (default) is bbr for an upload where the
                         kernel allows it, the system's otherwise
  --trace FILE           write each window-controller interval to FILE as
                         CSV: goodput, streams, connections, decisions, and
                         each connection's RTT, cwnd, retransmits, delivery
                         rate and what limited it (see hpncp trace --help)
  Without --streams, --connections or --hpn-disabled, a copy to a host that
  hpncp bench measured starts from its stored recommendation (-v says so;
  HPNCP_NO_CACHE=1 ignores it).

Tar mode (trees of many small files, to or from a server with GNU tar):
  --tar                  small files go as tar streams over a few exec
                         channels; fails where the server has no GNU tar
  --no-tar               never: every file over SFTP
  -C                     compress the tar streams (zstd, else gzip), and
                         with --delta the deltas (zstd, through the helper)
  --tar-streams N        tar streams at once [1 per 2,500 files or 16 MiB, up to 4]
  By default tar mode is chosen for a tree (-r) with at least 64 new files
  under 1 MiB when the server has GNU tar (one command asks), and not with
  --verify, --files-from, -O or --hpn-disabled. Files of 1 MiB and more
  take the SFTP pipeline. A new tree is written under a temporary name and
  renamed into place whole; nothing appears under a final name early.

Links (scp follows every symbolic link and copies each name of a file):
  --links                copy symbolic links as links, with their targets
                         as they are (an operand that is a link too, unless
                         written with a trailing slash)
  --safe-links           leave out, as skipped, links whose target leads
                         outside the copied tree (absolute ones included);
                         with --links the others stay links, without it
                         they are followed
  --hard-links           names of one local file arrive as one file with as
                         many names (hardlink@openssh.com over SFTP); local
                         sources only
  Not with -O: the legacy scp protocol carries files and directories only.

Re-runs and migrations:
  A file whose target has the same size and modification time (to the
  second) is skipped, as rsync's quick check. With -p the target keeps the
  source's time, so re-running a finished copy sends nothing; without -p
  the target's time is the copy's and files are sent again.
  --force                copy every file, as scp does
  --ignore-existing      skip every file the target already has
  --checksum             skip files whose size and SHA-256 match instead
  --verify               compare SHA-256 of source and written file before
                         the rename; a mismatch fails the file
  --delta                send a file whose target exists (64 KiB and more)
                         by rsync's delta transfer: only the blocks the
                         target lacks travel, each range of the result
                         checked against the source's hash. Needs hpncp
                         at the far end as its helper (hpncp helper install
                         HOST); without one the file goes whole (-v says
                         why). Not with -O, --tar, --resume or --sparse
  --inplace              write a file over its existing target where it
                         lies, not beside it and renamed (rsync's
                         --inplace): no room for a second copy is needed,
                         hard links to it see the new bytes, and with
                         --delta only the changed blocks are written; a
                         failed copy leaves the target part rewritten (a
                         byte longer than the source until it is whole).
                         Not with -O or --tar; a --sparse copy, a file
                         --resume goes on with, and a target that is not
                         a regular file are written beside as before
  --helper auto|never    with --delta, --verify or --checksum: use a helper
                         present there (auto, or the Helper of hpncp's
                         configuration file), or none; with one, the
                         remote end's SHA-256s are taken by it, not by
                         the server's sha256sum
  --helper-path CMD      the helper's command at the far end
  --helper-dir DIR       where hpncp helper install put it
  --files-from FILE      copy the paths FILE lists (one a line; - for stdin)
                         from the source directory to the same paths below
                         the target
  -0, --from0            the list's paths end in NUL, not newline
  --shard i/n            copy only files whose path hashes to shard i of n:
                         n runs, 0/n to n-1/n, cover every file once; hpncp
                         report merge combines their --json reports
  --json                 print a JSON report on stdout at the end
  --bwlimit RATE         limit bandwidth, as rsync's: 500 is 500 KiB/s, 10M is
                         10 MiB/s, 10MB is 10 MB/s, 100mbit is 100 Mbit/s
  --resume               continue an interrupted run: re-run the same command
                         with --resume. An interrupted or disconnected file's
                         temporary file is kept and continued where it
                         stopped; a target of the source's size, written
                         after the source last changed, counts as complete
                         (so files finished without -p are not sent again).
                         The journal is in $XDG_STATE_HOME/hpncp/resume
                         (default ~/.local/state/hpncp/resume); files of
                         64 MiB and more are journaled even without
                         --resume, so a killed run can be resumed
  --sparse               keep files' holes, as rsync -S: a local source's
                         holes are not read, and no 4 KiB block of zeros is
                         written, so holes stay holes (of a remote source
                         too, though they are read); not with -O

Hosts, users, ports, keys and known hosts come from ssh_config as OpenSSH
resolves it (ssh -G). Host keys are checked against known_hosts with
StrictHostKeyChecking's rules. Each file is written under a temporary name
(.hpncp.NAME.XXXX.part) and renamed into place once every byte arrived, so a
failed or interrupted copy never leaves a partial file under a final name.

Dead hosts and paths are reported, never waited on for ever:
  ConnectTimeout (default 15 s when ssh_config sets none) bounds each
  connection's set-up: TCP connect, key exchange and authentication, but
  not the time you take at a prompt. A connection sshd drops before the
  key exchange (MaxStartups, PerSourcePenalties: many copies at once) is
  retried with backoff within that time. Keepalives always run: after each
  ServerAliveInterval (default 10 s when unset, 0, or BatchMode's implicit
  300 s) in which the server sent nothing, a keepalive is sent; once
  ServerAliveCountMax (default 3) went unanswered, the connection is closed
  as ssh closes it and the copy fails with "server not responding". A dead
  path is so reported within ServerAliveInterval x (ServerAliveCountMax+1),
  40 s by default, plus ConnectTimeout for a re-dial. Set them with -o:
  -o ServerAliveInterval=5 -o ServerAliveCountMax=2 -o ConnectTimeout=10.

Exit status:
  0    every file copied (or already at the target)
  1    no file could be copied (each failure is reported)
  2    usage error
  3    partial: some files copied, others failed (each is reported)
  130  interrupted (SIGINT or SIGTERM; a second one ends hpncp at once)
  255  connection, host key or authentication failure, or a connection
       lost during the copy and not regained
`
