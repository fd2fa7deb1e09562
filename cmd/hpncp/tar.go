package main

import "github.com/hpncp/hpncp/transfer"

// tarOptions is the tar mode the flags ask for: automatic unless --tar or
// --no-tar says otherwise. The job turns automatic tar mode off where it
// cannot apply.
func (o *copyOptions) tarOptions() transfer.TarOptions {
	t := transfer.TarOptions{Mode: transfer.TarAuto, Compress: o.Compress, Streams: int(o.TarStreams)}
	switch {
	case o.Tar:
		t.Mode = transfer.TarForce
	case o.NoTar:
		t.Mode = transfer.TarOff
	}
	return t
}
