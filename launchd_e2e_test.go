package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/launchctltest"
)

// TestLaunchdLifecycle drives the whole CLI through the launchd backend, with the stand-in
// launchctl answering as macOS does (no Mac in CI): start writes and bootstraps the plists and
// reads the calendar back (step 5), status and ps see the chamber, send --wake kickstarts the
// wake job, a wake that launchd fires at load (RunAtLoad) does nothing, and cancel boots out and
// removes every plist.
func TestLaunchdLifecycle(t *testing.T) {
	fake := launchctltest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "mac plan & <notes>")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nbackend = \"launchd\"\n",
		"agent.sh":  "#!/bin/sh\necho '[CRYO:EXIT 0] ok'\necho '[CRYO:WAKE +2h]'\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The stand-in first on PATH; the rest of PATH for the agent's /bin/sh.
	env := []string{"HOME=" + home, "TZ=UTC", "LANG=C.UTF-8"}
	for _, kv := range fake.Env() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + v + ":" + os.Getenv("PATH")
		}
		env = append(env, kv)
	}
	run := func(want int, args ...string) string {
		t.Helper()
		code, out := bin(t, env, dir, args...)
		if code != want {
			t.Fatalf("%v exited %d, want %d:\n%s", args, code, want, out)
		}
		return out
	}

	out := run(0, "start", filepath.Join(dir, "plan.md"))
	for _, want := range []string{"step 4 timer registered           PASS  launchd", "step 5 timer matches wake         PASS  launchd reports", "step 6 fallback timer registered  PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("start output lacks %q:\n%s", want, out)
		}
	}
	id := timer.ID(dir)
	agents := filepath.Join(home, "Library", "LaunchAgents")
	plists, _ := filepath.Glob(filepath.Join(agents, "dev.cryochamber."+id+".*"))
	if len(plists) != 3 {
		t.Fatalf("want the wake, fallback and inbox plists, got %v", plists)
	}
	if len(fake.Loaded()) != 3 {
		t.Fatalf("loaded jobs: %v", fake.Loaded())
	}

	out = run(0, "status", "--dir", dir, "--json")
	var st chamber.StatusInfo
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Backend != "launchd" || len(st.Timers) != 2 || !st.Timers[0].Agree || !st.Timers[1].Agree {
		t.Fatalf("status sees %+v", st)
	}
	out = run(0, "ps", "--backend", "launchd")
	if !strings.Contains(out, "armed") || !strings.Contains(out, dir) {
		t.Fatalf("ps:\n%s", out)
	}

	// launchd runs the job when it is loaded (RunAtLoad): that wake finds nothing due.
	out = run(0, "wake", "--dir", dir)
	if !strings.Contains(out, "not due") {
		t.Fatalf("a load-time wake ran a session:\n%s", out)
	}

	// send --wake kickstarts the wake job (without -k: a running session is never killed).
	fake.ResetCalls()
	run(0, "send", "--dir", dir, "--wake", "hello")
	kicked := false
	for _, c := range fake.Calls() {
		if len(c) >= 2 && c[0] == "kickstart" && strings.HasSuffix(c[len(c)-1], ".wake") || len(c) >= 2 && c[0] == "kickstart" && strings.Contains(c[len(c)-1], ".wake.") {
			kicked = true
			for _, a := range c {
				if a == "-k" {
					t.Errorf("kickstart with -k would kill a running session: %v", c)
				}
			}
		}
	}
	if !kicked {
		t.Fatalf("send --wake did not kickstart the wake job: %v", fake.Calls())
	}

	run(0, "cancel", "--dir", dir)
	if plists, _ := filepath.Glob(filepath.Join(agents, "dev.cryochamber."+id+".*")); len(plists) != 0 {
		t.Fatalf("plists left after cancel: %v", plists)
	}
	if len(fake.Loaded()) != 0 {
		t.Fatalf("jobs still loaded after cancel: %v", fake.Loaded())
	}
	out = run(0, "ps", "--backend", "launchd")
	if !strings.Contains(out, "cancelled") {
		t.Fatalf("ps after cancel:\n%s", out)
	}
}
