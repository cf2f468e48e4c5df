package binary

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/launchctltest"
)

// On launchd (a stand-in launchctl that answers like the real one), a chamber with a digest
// loads the user's one digest agent at start, and cancel, taking the last chamber that wanted
// it out, unloads and removes it.
func TestLaunchdDigestAgent(t *testing.T) {
	t.Parallel()
	fake := launchctltest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "mac plan")
	env := launchdChamber(t, fake, home, dir, "+2h", "UTC")
	if err := os.WriteFile(filepath.Join(dir, "cryo.toml"), []byte("agent = \"./agent.sh\"\nbackend = \"launchd\"\ntimezone = \"Europe/Berlin\"\ndigest = \"weekly mon 09:00\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 || !strings.Contains(out, "digest timer armed") {
		t.Fatalf("start (%d):\n%s", code, out)
	}
	plist := filepath.Join(home, "Library", "LaunchAgents", timer.LaunchdDigestLabel+".plist")
	data, err := os.ReadFile(plist)
	if err != nil || !strings.Contains(string(data), "<string>--due</string>") || !strings.Contains(string(data), "<key>Minute</key>") {
		t.Fatalf("the digest agent (%v):\n%s", err, data)
	}
	loaded := func() bool {
		return slices.ContainsFunc(fake.Loaded(), func(l string) bool { return strings.Contains(l, timer.LaunchdDigestLabel) })
	}
	if !loaded() {
		t.Fatalf("the digest agent is not loaded: %v", fake.Loaded())
	}
	if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 {
		t.Fatalf("cancel (%d):\n%s", code, out)
	}
	if _, err := os.Stat(plist); !os.IsNotExist(err) || loaded() {
		t.Fatalf("after cancel the digest agent is still there (%v) or loaded (%v)", err, fake.Loaded())
	}
}
