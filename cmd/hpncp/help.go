package main

// helpText is hpncp's --help. It is a template for the CLI library, so it
// must not contain double braces.
const helpText = `hpncp copies files and directory trees over SSH, with scp's syntax, to and
from any OpenSSH server (it speaks SFTP), using large buffers and pipelined
requests.

Usage:
  hpncp [flags] SOURCE... TARGET
  hpncp ssh [ssh flags] [user@]host [command...]
  hpncp version

hpncp ssh is a remote shell with ssh's flags for rsync -e, git and scripts
(see hpncp ssh --help), also installable as hpnssh.

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
  -l limit      limit bandwidth, in Kbit/s
  -c cipher     cipher(s) to use, comma-separated
  -O            use the legacy SCP protocol (automatic for a host without SFTP)
  -3            copies between two remotes go through this host (always so)
  -4, -6        use IPv4 or IPv6 only
  -h, --help    show this help

Pipeline flags (large files go over several SFTP streams and connections):
  --streams N|auto       streams per large file; auto probes (default)
  --connections N|auto   SSH connections the streams spread over
  --hpn-disabled         one stream, plain pipeline: the baseline
  --chunk SIZE           bytes a stream moves at a time [1MiB]
  --window auto|BYTES    bytes each stream keeps in flight [3 chunks]
  --tcp-rcvbuf SIZE      TCP receive buffer (default: kernel autotuning)
  --tcp-sndbuf SIZE      TCP send buffer (default: kernel autotuning)

Hosts, users, ports, keys and known hosts come from ssh_config as OpenSSH
resolves it (ssh -G). Host keys are checked against known_hosts with
StrictHostKeyChecking's rules. Each file is written under a temporary name
(.hpncp.NAME.XXXX.part) and renamed into place once every byte arrived, so a
failed or interrupted copy never leaves a partial file under a final name.

Exit status:
  0    every file copied
  1    one or more files could not be copied (each is reported)
  2    usage error
  130  interrupted (SIGINT or SIGTERM)
  255  connection, host key or authentication failure
`
