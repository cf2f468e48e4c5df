package binary

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/launchctltest"
	"howett.net/plist"
)

// TestLaunchdSyncInstallLikeStart (issue 24, house item 1): on launchd, `sync --install` arms
// the sync agent the way start does: with XDG_STATE_HOME (so the syncs find the private state
// the chamber was started with) and its output in the files the wake rotates. Before, it wrote
// PATH and HOME only (a sync under another state directory, "is not a chamber") and appended
// for ever to sync/launchd.out, which nothing rotated.
func TestLaunchdSyncInstallLikeStart(t *testing.T) {
	t.Parallel()
	fake := launchctltest.New(t)
	home := t.TempDir()
	stateHome := filepath.Join(t.TempDir(), "elsewhere")
	dir := filepath.Join(t.TempDir(), "mac sync")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	toml := "backend = \"launchd\"\nmin_interval = \"1s\"\n" + fmt.Sprintf(syncToml, 2525, 1143)
	for name, data := range map[string]string{"plan.md": "x\n", "agent.sh": syncAgent, "cryo.toml": toml} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + stateHome, "TZ=UTC", "LANG=C.UTF-8", "CRYO_IMAP_PW=s3cret"}
	for _, kv := range fake.Env() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + v + ":" + os.Getenv("PATH")
		}
		env = append(env, kv)
	}
	run := func(args ...string) string {
		t.Helper()
		code, out := bin(t, env, dir, args...)
		if code != 0 {
			t.Fatalf("cryochamber %s: exit %d:\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	run("start", filepath.Join(dir, "plan.md"))
	id := timer.ID(dir)
	store := filepath.Join(stateHome, "cryochamber", "chambers", id)
	path := filepath.Join(home, "Library", "LaunchAgents", timer.LaunchdPlistName(timer.LaunchdSyncLabel(id)))
	byStart, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("start armed no sync agent: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	run("sync", "--install")
	byInstall, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("sync --install armed no sync agent: %v", err)
	}
	var job struct {
		Env    map[string]string `plist:"EnvironmentVariables"`
		Stdout string            `plist:"StandardOutPath"`
		Stderr string            `plist:"StandardErrorPath"`
	}
	if _, err := plist.Unmarshal(byInstall, &job); err != nil {
		t.Fatal(err)
	}
	if job.Env["XDG_STATE_HOME"] != stateHome || job.Env["HOME"] != home {
		t.Errorf("sync --install: EnvironmentVariables %v, want XDG_STATE_HOME=%s and HOME=%s", job.Env, stateHome, home)
	}
	if job.Stdout != filepath.Join(store, "launchd.out") || job.Stderr != filepath.Join(store, "launchd.err") {
		t.Errorf("sync --install: output to %s and %s, want the files the wake rotates in %s", job.Stdout, job.Stderr, store)
	}
	if !bytes.Equal(byInstall, byStart) {
		t.Errorf("sync --install wrote another sync agent than start:\n%s\nstart's:\n%s", byInstall, byStart)
	}
	if strings.Contains(string(byInstall), "s3cret") {
		t.Error("the channel secret is in the (world-readable) plist")
	}

	// The output is rotated like the wake's: a command that holds the lock keeps the last few
	// MiB of it.
	if err := os.WriteFile(job.Stdout, bytes.Repeat([]byte("sync output\n"), 400_000), 0o600); err != nil {
		t.Fatal(err)
	}
	run("wake", "--dir", dir)
	if _, err := os.Stat(job.Stdout + ".1"); err != nil {
		t.Errorf("the sync agent's output was not rotated: %v", err)
	}
}
