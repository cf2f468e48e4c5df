package chamber

import (
	"strings"
	"testing"
	"time"
)

// TestSnapshotKeys: the defaults, and every bad value named with its line.
func TestSnapshotKeys(t *testing.T) {
	c, err := ParseConfig("cryo.toml", nil, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if !c.SnapshotsOn() || c.SnapshotMaxFile.N != 10<<20 || c.SnapshotKeep.D != 365*24*time.Hour || len(c.SnapshotExclude) != 0 {
		t.Errorf("defaults: on=%v max=%d keep=%s exclude=%v", c.SnapshotsOn(), c.SnapshotMaxFile.N, c.SnapshotKeep.D, c.SnapshotExclude)
	}
	c, err = ParseConfig("cryo.toml", []byte("snapshots = false\nsnapshot_exclude = [\"node_modules\", \"build/*.o\"]\nsnapshot_max_file = \"1MiB\"\nsnapshot_keep = \"90d\"\n"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotsOn() || c.SnapshotMaxFile.N != 1<<20 || c.SnapshotKeep.D != 90*24*time.Hour {
		t.Errorf("set: on=%v max=%d keep=%s", c.SnapshotsOn(), c.SnapshotMaxFile.N, c.SnapshotKeep.D)
	}
	opt := c.snapshotOptions()
	for p, want := range map[string]bool{"node_modules/x/y.js": true, "a/node_modules": true, "build/a.o": true, "src/build/a.o": false,
		"cryo.log": true, "cryo.log.corrupt-20260101T000000Z": true, "messages/inbox/x.md": true, ".git/config": true, ".cryo/prompt.md": true,
		"timer.json": true, "sub/timer.json": false, "NOTES.md": false, "plan.md": false} {
		if got := opt.Excluded(p); got != want {
			t.Errorf("Excluded(%q) = %v, want %v", p, got, want)
		}
	}
	for _, tc := range []struct{ toml, want string }{
		{"agent = \"opencode\"\nsnapshot_keep = \"forever\"\n", `cryo.toml:2: snapshot_keep: "forever" is not a retention`},
		{"snapshot_keep = \"2h\"\n", "cryo.toml:1: snapshot_keep: must be at least a day"},
		{"snapshot_max_file = \"0\"\n", "cryo.toml:1: snapshot_max_file: must be more than 0"},
		{"snapshot_max_file = \"lots\"\n", `cryo.toml:1: snapshot_max_file: "lots" is not a size`},
		{"snapshot_exclude = [\"[a-\"]\n", `cryo.toml:1: snapshot_exclude: "[a-" is not a glob`},
		{"snapshots = \"yes\"\n", "cryo.toml:1"},
	} {
		_, err := ParseConfig("cryo.toml", []byte(tc.toml), time.UTC)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.toml, err, tc.want)
		}
	}
}
