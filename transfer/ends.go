package transfer

import (
	"context"

	"github.com/hpncp/hpncp/protocol"
)

// The engine finds an end's fast paths by type assertion: an end lacking
// a method goes the slow way, without a word. These declarations make a
// renamed or changed method of the ends hpncp has a build failure
// instead of a fast path silently dropped. Each optional interface is
// declared where it is used; the list of them is here.
var (
	_ FS = Local{}
	_ FS = (*protocol.SFTP)(nil)

	// Several streams for one file (parallel.go, resume.go).
	_ streamReader   = Local{}
	_ streamWriter   = Local{}
	_ streamReader   = (*protocol.SFTP)(nil)
	_ streamWriter   = (*protocol.SFTP)(nil)
	_ streamPreparer = (*protocol.SFTP)(nil)
	_ packetSource   = (*protocol.SFTP)(nil)
	_ rttSource      = (*protocol.SFTP)(nil)

	// Sparse files' sizes (sparse.go).
	_ sizer = Local{}
	_ sizer = (*protocol.SFTP)(nil)

	// Small files and directories in batches (small.go, umask.go).
	_ smallGetter   = (*protocol.SFTP)(nil)
	_ smallPutter   = (*protocol.SFTP)(nil)
	_ smallPreparer = (*protocol.SFTP)(nil)
	_ modeMkdirer   = (*protocol.SFTP)(nil)
	_ modeMkdirer   = Local{}
	_ umaskProber   = (*protocol.SFTP)(nil)

	// Listings and sums done by the server (fs.go, verify.go).
	_ contextDirReader = (*protocol.SFTP)(nil)
	_ summer           = (*protocol.SFTP)(nil)

	// Links and owners kept as they are (links.go).
	_ LinkReader = Local{}
	_ Symlinker  = Local{}
	_ HardLinker = Local{}
	_ Chowner    = Local{}
	_ LinkReader = (*protocol.SFTP)(nil)
	_ Symlinker  = (*protocol.SFTP)(nil)
	_ HardLinker = (*protocol.SFTP)(nil)
	_ Chowner    = (*protocol.SFTP)(nil)
	_ LinkTimer  = Local{}
	_ LinkTimer  = (*protocol.SFTP)(nil)

	// Tar mode (tar.go).
	_ tarEnd      = (*protocol.SFTP)(nil)
	_ tarPreparer = (*protocol.SFTP)(nil)
	_ tarAheader  = (*protocol.SFTP)(nil)
)

// tarPreparer is an end that can start what tar mode needs (a probe of
// the server's tar) before the first tree asks.
type tarPreparer interface {
	PrepareTar(ctx context.Context)
}

// tarAheader is a server that starts a download's tar -c commands while
// its tree is listed, before their names are known.
type tarAheader interface {
	TarCreateAhead(ctx context.Context, dir string, o protocol.TarOptions)
	DropTarAhead()
}
