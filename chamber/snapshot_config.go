package chamber

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// The snapshot keys of cryo.toml (issue 27): snapshots, snapshot_exclude, snapshot_max_file,
// snapshot_keep.

// Defaults of the snapshot keys.
const (
	DefaultSnapshotMaxFile = 10 << 20
	DefaultSnapshotKeep    = 365 * 24 * time.Hour
)

// Retention is how long snapshots are kept: "1y", "2w", "90d", or a Go duration ("720h").
type Retention struct {
	D   time.Duration
	set bool
}

// UnmarshalText parses a retention.
func (k *Retention) UnmarshalText(b []byte) error {
	d, err := ParseRetention(string(b))
	if err != nil {
		return &valueError{string(b), err.Error()}
	}
	k.D, k.set = d, true
	return nil
}

// ParseRetention reads "1y" (365 days), "90d", "2w", or a Go duration.
func ParseRetention(text string) (time.Duration, error) {
	t := strings.TrimSpace(text)
	bad := fmt.Errorf("%q is not a retention (want a number of years, weeks or days such as \"1y\", \"8w\", \"90d\", or a Go duration such as \"720h\")", text)
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}} {
		if n, ok := strings.CutSuffix(t, u.suffix); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v <= 0 || v > 100*365 {
				return 0, bad
			}
			return time.Duration(v) * u.d, nil
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil || d <= 0 {
		return 0, bad
	}
	return d, nil
}

// SnapshotsOn reports whether snapshots are taken (snapshots = true, the default).
func (c *Config) SnapshotsOn() bool { return c.Snapshots == nil || *c.Snapshots }

func (c *Config) checkSnapshots(bad func(table, key, format string, args ...any) error) error {
	if !c.SnapshotMaxFile.set {
		c.SnapshotMaxFile.N = DefaultSnapshotMaxFile
	}
	if c.SnapshotMaxFile.N <= 0 {
		return bad("", "snapshot_max_file", "must be more than 0 (to take no snapshots, set snapshots = false)")
	}
	if !c.SnapshotKeep.set {
		c.SnapshotKeep.D = DefaultSnapshotKeep
	}
	if c.SnapshotKeep.D < 24*time.Hour {
		return bad("", "snapshot_keep", "must be at least a day (\"1d\")")
	}
	for _, g := range c.SnapshotExclude {
		if strings.TrimSpace(g) == "" || strings.ContainsAny(g, "\x00\n") {
			return bad("", "snapshot_exclude", "%q is not a glob", g)
		}
		if _, err := path.Match(g, ""); err != nil {
			return bad("", "snapshot_exclude", "%q is not a glob: %v", g, err)
		}
	}
	return nil
}
