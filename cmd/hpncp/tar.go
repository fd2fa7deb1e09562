package main

import "github.com/hpncp/hpncp/transfer"

// checkTar refuses --tar with what tar mode cannot do: --verify hashes
// each written file before its rename, which the tar stream's renames
// after the fact leave no room for; --files-from names files one by one;
// --resume continues partial files, and a tar stream leaves none.
func (o *copyOptions) checkTar() error {
	switch {
	case o.Tar && o.NoTar:
		return usagef("", "--tar and --no-tar exclude each other")
	case o.Tar && o.Verify:
		return usagef("leave out --tar to verify each file", "--tar does not work with --verify")
	case o.Tar && o.FilesFrom != "":
		return usagef("leave out --tar to copy a list of files", "--tar does not work with --files-from")
	case o.Tar && o.Resume:
		return usagef("leave out --tar to continue partial files", "--tar does not work with --resume")
	case o.Tar && !o.Recursive:
		return usagef("tar mode copies trees: add -r", "--tar goes with -r")
	case o.TarStreams < 0 || o.TarStreams > 64:
		return usagef("", "--tar-streams %d: want a number from 1 to 64", o.TarStreams)
	}
	return nil
}

// tarOptions is the tar mode the flags ask for: automatic unless --tar or
// --no-tar says otherwise, and off where tar mode cannot apply.
func (o *copyOptions) tarOptions(legacy bool) transfer.TarOptions {
	t := transfer.TarOptions{Mode: transfer.TarAuto, Compress: o.Compress, Streams: int(o.TarStreams)}
	switch {
	case o.Tar:
		t.Mode = transfer.TarForce
	case o.NoTar || legacy || o.Verify || o.FilesFrom != "" || o.HPNDisabled || o.Resume:
		t.Mode = transfer.TarOff
	}
	return t
}
