package main

// syncHelpText is hpncp sync --help.
const syncHelpText = `hpncp sync makes DEST match SRC with rsync's command line and semantics, on
hpncp's engine (its parallel pipeline, resume and verification): the server
needs only sshd with its SFTP subsystem, no rsync.

Usage:
  hpncp sync [flags] SRC... DEST

A source with a trailing slash (dir/) copies what the directory holds into
DEST; without one (dir) the directory itself goes inside DEST. DEST is
created when missing (not its parents). A re-run sends only what changed.
Either end may be remote ([user@]host:path); not both.

Where hpncp runs at the remote end as its helper (hpncp helper install
HOST), a changed file whose old version is at DEST goes by rsync's delta
transfer: only the blocks it lacks travel, each range of the result is
checked against the hash of the source's bytes, and large files are diffed
and rebuilt on every core. Without a helper every changed file goes whole, and
-vv says why.

Flags (rsync's, with rsync's meanings):
  -a, --archive          -rlptgoD
  -r, --recursive        recurse into directories
  -l, --links            copy symbolic links as links (otherwise skipped)
  -p, --perms            keep permissions
  -t, --times            keep modification times
  -o, --owner            keep the owner (numeric; when the receiver is root)
  -g, --group            keep the group (numeric)
  -D                     devices and specials: reported and skipped (SFTP
                         cannot create them)
  -H, --hard-links       keep hard links among the files sent (local sources)
  -S, --sparse           leave holes in sparse files
      --safe-links       leave out links that point outside the tree
  -n, --dry-run          show what would change; change nothing
  -i, --itemize-changes  a line per change, in rsync's format
  -v, --verbose          the names of what changes; -vv the engine's log
  -q, --quiet            no progress, no summary
  -u, --update           leave files that are newer on the receiver
  -c, --checksum         compare content, not size and time (SHA-256 by the
                         server's sha256sum, or XXH3-128 by a helper there)
  -I, --ignore-times     send every file
  -W, --whole-file       send changed files whole, never as deltas (the
                         fast path on a fast link); --no-whole-file undoes it
      --inplace          write a changed file over its target where it
                         lies, not beside it and renamed: a delta writes
                         only what changed, a whole file is rewritten (no
                         second copy; hard links to it see the new bytes;
                         a cut run leaves it part rewritten until the next)
      --append, --append-verify  leave alone a changed file whose target
                         is not shorter; send the rest of one that is,
                         in place (--inplace), the whole file checked
                         (both verify: hpncp never trusts the old bytes)
      --size-only        compare size only
      --existing         create nothing new on the receiver
      --ignore-existing  update nothing the receiver has
      --min-size=SIZE, --max-size=SIZE   leave out smaller or larger files
      --delete           delete what the source lacks (after the transfer);
                         never after a failed listing, never outside DEST
      --delete-excluded  also delete what the filters exclude
      --max-delete=N     delete at most N entries (exit 25 beyond)
      --exclude=PAT, --include=PAT, --filter='+ PAT' / '- PAT'
      --exclude-from=FILE, --include-from=FILE
                         rsync's filter rules: first match wins, / anchors,
                         a trailing / matches directories, * ** ? [..]
      --remove-source-files  remove each source file once its copy is in
                         place and checked
      --partial          keep interrupted files and continue them (hpncp's
                         resume journal)
  -P                     --partial --progress
      --progress, --info=progress2   progress on stderr
      --stats            counts at the end
      --bwlimit=RATE     a bare number is KiB/s, as rsync's
  -e, --rsh='ssh -p 2222 -i key -o K=V -J jump -F cfg'
                         read for its ssh flags: hpncp makes the connections
  -z, --compress         deltas go zstd-compressed through the helper, both
                         ways, where that costs less than sending them as
                         they are; files sent whole over SFTP are not
      --numeric-ids      accepted: owners are always numeric
  -h, --human-readable   accepted
hpncp's own:
      --json             a JSON report on stdout, with the planned changes
      --verify           hash each file sent against its source
      --helper=auto|never  use a helper present at the remote end for deltas
                         (auto, or the Helper of hpncp's configuration
                         file), or none; nothing is ever uploaded by sync
      --helper-path=CMD  the helper's command at the remote end
      --helper-dir=DIR   where hpncp helper install put it (~/.cache/hpncp/helper)

Exit codes (rsync's): 0 done, 1 usage, 20 interrupted, 23 some files or
deletions failed, 25 --max-delete stopped deletions, 255 connection failed.
`
