// Package recommend keeps what hpncp bench found best for each host, in
// $XDG_CACHE_HOME/hpncp/hosts/HOST.json, for later copies to that host to
// start from. It is apart from the benchmark so that a copy, which reads
// the store on every run, does not carry the benchmark with it.
package recommend

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Recommendation is what a bench found best for a host, kept so that later
// copies to the host start from it.
type Recommendation struct {
	Host string `json:"host"`
	// Config names the configuration that won, as in the table.
	Config string `json:"config"`
	// Streams is the --streams to use: 0 for auto.
	Streams int `json:"streams"`
	// Connections is the --connections to use: 0 for auto.
	Connections int `json:"connections"`
	// HPNDisabled says one plain stream beat every parallel configuration.
	HPNDisabled bool `json:"hpn_disabled,omitempty"`
	// StartStreams, when auto won, is the most streams its runs used:
	// where later copies' window controller starts, rather than at its
	// guess. 0 when unknown.
	StartStreams int `json:"start_streams,omitempty"`
	// MBps is the winner's median throughput, uploads and downloads
	// averaged, in MB/s.
	MBps     float64   `json:"mbps"`
	Measured time.Time `json:"measured"`
}

// cachePath is where host's recommendation lives:
// $XDG_CACHE_HOME/hpncp/hosts/<host>.json (os.UserCacheDir's rules).
func cachePath(host string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: %w", err)
	}
	name := cacheName(host)
	if name == "" {
		return "", fmt.Errorf("no cache file for host %q", host)
	}
	return filepath.Join(dir, "hpncp", "hosts", name+".json"), nil
}

// cacheName makes a host name safe as a file name: host names and
// addresses keep their form, anything that could leave the directory or
// is awkward in a name (IPv6 colons, slashes) becomes '_'.
func cacheName(host string) string {
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if host == "" || host == "." || host == ".." {
		return ""
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-', r == '_', r == '@':
			return r
		}
		return '_'
	}, host)
}

// Save stores r for r.Host, replacing what was there. The
// file is written under a temporary name and renamed, so a reader never
// sees half of it.
func Save(r Recommendation) error {
	p, err := cachePath(r.Host)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("save recommendation for %s: %w", r.Host, err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("save recommendation for %s: %w", r.Host, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("save recommendation for %s: %w", r.Host, err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save recommendation for %s to %s: %w", r.Host, p, err)
	}
	return nil
}

// Load returns the stored recommendation for host, and false
// when there is none or it cannot be read: a missing or damaged cache only
// means starting from the defaults.
func Load(host string) (Recommendation, bool) {
	p, err := cachePath(host)
	if err != nil {
		return Recommendation{}, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Recommendation{}, false
	}
	var r Recommendation
	if err := json.Unmarshal(b, &r); err != nil || r.Streams < 0 || r.Connections < 0 || r.StartStreams < 0 {
		return Recommendation{}, false
	}
	return r, true
}

// Forget removes host's stored recommendation; it reports
// whether there was one.
func Forget(host string) (bool, error) {
	p, err := cachePath(host)
	if err != nil {
		return false, err
	}
	err = os.Remove(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("forget recommendation for %s: %w", host, err)
	}
	return true, nil
}
