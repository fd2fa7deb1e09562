package transfer

import "fmt"

// OptionError is a combination of options a copy cannot honour. Its text
// names the options by hpncp's flags, the words the user gave them in; a
// command line maps it to its usage error.
type OptionError struct {
	Msg  string
	Hint string // what to change, or ""
}

func (e *OptionError) Error() string { return e.Msg }

// maxTarStreams bounds TarOptions.Streams: each stream is an exec channel
// and a remote tar process.
const maxTarStreams = 64

// Validate refuses combinations of options Copy cannot honour. Only the
// options given matter, not their values: FilesFrom is checked for being
// set (a list, even an empty one), so a caller may validate before it
// reads the list.
func (o Options) Validate() error {
	// Tar mode's limits: --verify hashes each written file before its
	// rename, which the tar stream's renames after the fact leave no room
	// for; --files-from names files one by one; --resume continues partial
	// files, and a tar stream leaves none.
	tar := o.Tar.Mode == TarForce
	switch {
	case tar && o.Verify:
		return &OptionError{"--tar does not work with --verify", "leave out --tar to verify each file"}
	case tar && o.FilesFrom != nil:
		return &OptionError{"--tar does not work with --files-from", "leave out --tar to copy a list of files"}
	case tar && o.Resume:
		return &OptionError{"--tar does not work with --resume", "leave out --tar to continue partial files"}
	case tar && !o.Recursive:
		return &OptionError{"--tar goes with -r", "tar mode copies trees: add -r"}
	case o.Tar.Streams < 0 || o.Tar.Streams > maxTarStreams:
		return &OptionError{Msg: fmt.Sprintf("--tar-streams %d: want a number from 1 to %d", o.Tar.Streams, maxTarStreams)}
	}
	return nil
}

// ValidateSCP is Validate for a copy over the legacy scp protocol
// (an SCP end), which sends files blind: it cannot hash, list or stat a
// target, nor keep a partial file, and has no tar mode.
func (o Options) ValidateSCP() error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Verify || o.Skip == SkipChecksum || o.Skip == SkipExisting || o.Shard != nil || o.FilesFrom != nil || o.Resume {
		return &OptionError{
			"--verify, --checksum, --ignore-existing, --shard, --files-from and --resume do not work with the legacy scp protocol (-O)",
			"the legacy scp protocol sends files blind: these need an SFTP server"}
	}
	if o.Tar.Mode == TarForce {
		return &OptionError{"--tar does not work with the legacy scp protocol", "leave out -O or --tar"}
	}
	if o.Sparse {
		return &OptionError{"--sparse does not work with the legacy scp protocol (-O)",
			"the legacy scp protocol writes every byte as it comes: leave out -O to keep holes"}
	}
	return o.linksSCP()
}

// linksSCP refuses links kept as links: scp's records are files and
// directories, so a link could only be sent as what it points to, which
// is not what was asked. --safe-links, which only leaves links out, works.
func (o Options) linksSCP() error {
	if o.Links.Symlinks || o.Links.Hard {
		return &OptionError{"--links and --hard-links do not work with the legacy scp protocol (-O)",
			"the legacy scp protocol carries files and directories only: these need an SFTP server"}
	}
	return nil
}
