package protocol

// The numbers of the SFTP protocol version 3 that hpncp speaks itself
// (draft-ietf-secsh-filexfer-02, as OpenSSH implements it), on the
// sessions of its data path, batches and listings; pkg/sftp speaks the
// same protocol on the main session.

// Packet types.
const (
	fxpInit     = 1
	fxpVersion  = 2
	fxpOpen     = 3
	fxpClose    = 4
	fxpRead     = 5
	fxpWrite    = 6
	fxpLstat    = 7
	fxpFstat    = 8
	fxpSetstat  = 9
	fxpOpendir  = 11
	fxpReaddir  = 12
	fxpRemove   = 13
	fxpMkdir    = 14
	fxpRmdir    = 15
	fxpStat     = 17
	fxpExtended = 200

	// Replies.
	fxpStatus        = 101
	fxpHandle        = 102
	fxpData          = 103
	fxpName          = 104
	fxpAttrs         = 105
	fxpExtendedReply = 201
)

// Flags of SSH_FXP_OPEN.
const (
	fxfRead  = 0x01
	fxfWrite = 0x02
	fxfCreat = 0x08
	fxfExcl  = 0x20
)

// Flags of ATTRS: which fields follow.
const (
	attrSize        = 0x1
	attrUIDGID      = 0x2
	attrPermissions = 0x4
	attrACModTime   = 0x8
	attrExtended    = 0x80000000
)

// Status codes of SSH_FXP_STATUS.
const (
	fxOK               = 0
	fxEOF              = 1
	fxNoSuchFile       = 2
	fxPermissionDenied = 3
	// fxFailure is what OpenSSH's sftp-server sends for any error it has
	// no code for, a full disk among them.
	fxFailure        = 4
	fxBadMessage     = 5
	fxNoConnection   = 6
	fxConnectionLost = 7
	fxOpUnsupported  = 8
)

// statusNames names the status codes in messages.
var statusNames = [...]string{
	fxOK:               "SSH_FX_OK",
	fxEOF:              "SSH_FX_EOF",
	fxNoSuchFile:       "SSH_FX_NO_SUCH_FILE",
	fxPermissionDenied: "SSH_FX_PERMISSION_DENIED",
	fxFailure:          "SSH_FX_FAILURE",
	fxBadMessage:       "SSH_FX_BAD_MESSAGE",
	fxNoConnection:     "SSH_FX_NO_CONNECTION",
	fxConnectionLost:   "SSH_FX_CONNECTION_LOST",
	fxOpUnsupported:    "SSH_FX_OP_UNSUPPORTED",
}
