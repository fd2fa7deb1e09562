// Package hostconfig reads hpncp's own configuration file: per-host
// settings OpenSSH's ssh_config has no keyword for, in ssh_config's
// syntax (Host blocks, the first value of a key wins), so that ssh's own
// files stay valid for ssh.
package hostconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kevinburke/ssh_config"
)

// Path is the file hpncp reads: $XDG_CONFIG_HOME/hpncp/config, else
// ~/.config/hpncp/config; "" where neither can be named.
func Path() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "hpncp", "config")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "hpncp", "config")
}

// maxSize bounds the file read: it is a handful of Host blocks.
const maxSize = 1 << 20

// Get returns key's value for host (as the user typed it, before any
// HostName) in the configuration file, "" where it sets none or there is
// no file. A file that cannot be read or parsed is an error naming it.
func Get(host, key string) (string, error) {
	p := Path()
	if p == "" {
		return "", nil
	}
	data, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read %s: %w", p, err)
	case len(data) > maxSize:
		return "", fmt.Errorf("read %s: more than %d bytes", p, maxSize)
	}
	cfg, err := ssh_config.DecodeBytes(data)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", p, err)
	}
	v, err := cfg.Get(host, key)
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", p, key, err)
	}
	return v, nil
}
