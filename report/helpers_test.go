package report

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hpncp/hpncp/transfer"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyLocal copies the local paths args, the last the target, as hpncp
// would between two local operands.
func copyLocal(t *testing.T, o transfer.Options, args ...string) (*transfer.Result, error) {
	t.Helper()
	var srcs []transfer.Endpoint
	for _, a := range args[:len(args)-1] {
		srcs = append(srcs, transfer.Endpoint{FS: transfer.Local{}, Path: a})
	}
	dst := transfer.Endpoint{FS: transfer.Local{}, Path: args[len(args)-1]}
	return transfer.Copy(context.Background(), srcs, dst, o)
}
