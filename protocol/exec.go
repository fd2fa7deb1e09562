package protocol

import "strings"

// QuoteArg quotes s as one word for the remote user's shell, which runs
// every command an exec request names.
func QuoteArg(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
