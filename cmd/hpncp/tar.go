package main

import "github.com/hpncp/hpncp/transfer"

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
