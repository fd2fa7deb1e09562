// Package recommend keeps what hpncp bench found best for each
// destination, in $XDG_CACHE_HOME/hpncp/hosts/KEY.json, for later copies
// to it to start from. A destination's key (Key) is the user, host name
// and port the ssh configuration resolves it to, so that every alias of
// one server shares its measurement and two aliases of different servers
// do not; files from before keys were resolved are named by the host as
// typed, and callers may still look those up by that name. Beside it,
// what hpncp ssh last found of the destination's helper (Helper). It is apart from the benchmark so that a copy, which reads
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
	// Host is the destination as the bench's command line named it.
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

// Key is the store's key for the destination user@host:port, where each
// is what the ssh configuration resolves the command line's to (ssh -G's
// user, hostname and port).
func Key(user, host string, port int) string {
	return fmt.Sprintf("%s@%s:%d", user, strings.ToLower(host), port)
}

// hostsDir is $XDG_CACHE_HOME/hpncp/hosts (os.UserCacheDir's rules).
func hostsDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: %w", err)
	}
	return filepath.Join(dir, "hpncp", "hosts"), nil
}

// cachePath is where key's recommendation lives: hostsDir/<key>.json.
func cachePath(key string) (string, error) {
	dir, err := hostsDir()
	if err != nil {
		return "", err
	}
	name := cacheName(key)
	if name == "" {
		return "", fmt.Errorf("no cache file for host %q", key)
	}
	return filepath.Join(dir, name+".json"), nil
}

// Any reports whether anything at all is stored, so that a copy need not
// resolve its destination's key when nothing could match it.
func Any() bool {
	dir, err := hostsDir()
	if err != nil {
		return false
	}
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) > 0
}

// cacheName makes a key safe as a file name: host names and addresses
// keep their form, anything that could leave the directory or is awkward
// in a name (the port's colon, IPv6 colons, slashes) becomes '_'.
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

// Save stores r under key, replacing what was there. The file is written
// under a temporary name and renamed, so a reader never sees half of it.
func Save(key string, r Recommendation) error {
	p, err := cachePath(key)
	if err != nil {
		return err
	}
	if err := saveJSON(p, r); err != nil {
		return fmt.Errorf("save recommendation for %s: %w", key, err)
	}
	return nil
}

// saveJSON writes v to p as JSON under a temporary name, then renames it;
// the directory is made owner-only where it is missing.
func saveJSON(p string, v any) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
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
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

// Load returns the recommendation stored under key, and false when there
// is none or it cannot be read: a missing or damaged cache only means
// starting from the defaults.
func Load(key string) (Recommendation, bool) {
	p, err := cachePath(key)
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

// Forget removes the recommendation stored under key; it reports whether
// there was one.
func Forget(key string) (bool, error) {
	p, err := cachePath(key)
	if err != nil {
		return false, err
	}
	err = os.Remove(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("forget recommendation for %s: %w", key, err)
	}
	return true, nil
}

// Helper is what hpncp ssh last found of a destination's helper (hpncp
// serve at the far end): with it, the next hpncp ssh there dials the
// striped command's further connections beside the first rather than
// after the helper's hello, some ten round trips sooner.
type Helper struct {
	Protocol int       `json:"protocol"`
	RTTms    float64   `json:"rtt_ms"` // the path's round trip then
	Seen     time.Time `json:"seen"`
}

// helperPath is where key's helper record lives, beside its
// recommendation: hostsDir/<key>.helper.json.
func helperPath(key string) (string, error) {
	p, err := cachePath(key)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(p, ".json") + ".helper.json", nil
}

// SaveHelper stores h under key.
func SaveHelper(key string, h Helper) error {
	p, err := helperPath(key)
	if err != nil {
		return err
	}
	if err := saveJSON(p, h); err != nil {
		return fmt.Errorf("remember the helper of %s: %w", key, err)
	}
	return nil
}

// LoadHelper is the helper record stored under key, false when there is
// none or it cannot be read.
func LoadHelper(key string) (Helper, bool) {
	p, err := helperPath(key)
	if err != nil {
		return Helper{}, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Helper{}, false
	}
	var h Helper
	if err := json.Unmarshal(b, &h); err != nil || h.Protocol <= 0 || h.RTTms < 0 {
		return Helper{}, false
	}
	return h, true
}

// ForgetHelper removes key's helper record, if there is one.
func ForgetHelper(key string) error {
	p, err := helperPath(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forget the helper of %s: %w", key, err)
	}
	return nil
}
