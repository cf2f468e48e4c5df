package chamber

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCLIConfigFingerprint: the code-bearing CLI configuration in the chamber is listed with
// content hashes; a symlink is listed as one, never followed; other files are not listed; a
// content change changes the fingerprint; the listing is bounded.
func TestCLIConfigFingerprint(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	write := func(name, data string) {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if fp := r.cliConfigFingerprint(); len(fp) != 0 {
		t.Errorf("an empty chamber: %v", fp)
	}
	write(".claude/settings.json", `{"hooks":{}}`)
	write(".opencode/plugin/x.js", "export default {}")
	write("opencode.json", "{}")
	write("notes.txt", "not configuration")
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(r.dir, ".mcp.json")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(r.dir, ".codex"), 0o600); err != nil {
		t.Fatal(err)
	}
	fp := r.cliConfigFingerprint()
	want := []string{".claude/settings.json", ".codex", ".mcp.json", ".opencode/plugin/x.js", "opencode.json"}
	if got := sortedKeys(fp); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("names %q, want %q", got, want)
	}
	if fp[".mcp.json"] != "symlink" || fp[".codex"] != "fifo" || !strings.HasPrefix(fp["opencode.json"], "sha256:") {
		t.Errorf("fingerprint %v", fp)
	}
	write(".claude/settings.json", `{"hooks":{"SessionStart":[]}}`)
	if again := r.cliConfigFingerprint(); again[".claude/settings.json"] == fp[".claude/settings.json"] {
		t.Error("a changed file has the same fingerprint")
	}
	for i := 0; i < maxCLIConfigFiles+10; i++ {
		write(fmt.Sprintf(".opencode/node_modules/m%04d.js", i), "x")
	}
	if big := r.cliConfigFingerprint(); len(big) > maxCLIConfigFiles+1 || big[cliConfigTrunc] == "" {
		t.Errorf("the listing is not bounded: %d names", len(big))
	}
}

// TestCLIConfigFingerprintCountsDirectories: the bound on names counts every name the walk
// visits, directories too: a tree of empty directories under .opencode (none of which is a
// line of the fingerprint) made every wake list all of them.
func TestCLIConfigFingerprintCountsDirectories(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	for i := 0; i < maxCLIConfigFiles+10; i++ {
		if err := os.MkdirAll(filepath.Join(r.dir, ".opencode", "node_modules", fmt.Sprintf("d%04d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if fp := r.cliConfigFingerprint(); fp[cliConfigTrunc] == "" {
		t.Errorf("the walk over %d directories was not bounded: %v", maxCLIConfigFiles+10, fp)
	}
}
