package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/sandbox"
)

// sleepers lists the processes of this machine running `sleep <arg>`.
func sleepers(arg string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == "sleep "+arg {
			out = append(out, e.Name())
		}
	}
	return out
}

// Exec's process-group kill reaches everything in the cage: at session_timeout the agent and
// the processes it started (in a session of their own inside: bubblewrap's --new-session) are
// gone, and so is what an agent that exited left behind.
func TestExecCageKillsAll(t *testing.T) {
	tool := e2e.LookPath(t, "bwrap", "bubblewrap")
	if err := sandbox.Probe(context.Background(), tool); err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	dir := t.TempDir()
	cage := &sandbox.Cage{Mechanism: sandbox.Bubblewrap, Tool: tool, Policy: sandbox.Policy{Chamber: dir}}
	run := func(script string, timeout time.Duration) Result {
		return Exec(context.Background(), Run{
			Invocation: Invocation{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}},
			Dir:        dir, Timeout: timeout, Grace: time.Second, Cage: cage,
		})
	}

	res := run("setsid sleep 3101 & sleep 3102 & echo started > started; sleep 3103", time.Second)
	if !res.TimedOut || res.Err != nil {
		t.Fatalf("result %+v, want a timeout", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "started")); err != nil {
		t.Fatalf("the agent did not run in the chamber: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, a := range []string{"3101", "3102", "3103"} {
		for len(sleepers(a)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if p := sleepers(a); len(p) > 0 {
			t.Errorf("sleep %s outlived the timeout: pids %v", a, p)
		}
	}

	res = run("sleep 3104 & echo '[CRYO:EXIT 0] done'", 0)
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("result %+v", res)
	}
	for deadline := time.Now().Add(5 * time.Second); len(sleepers("3104")) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if p := sleepers("3104"); len(p) > 0 {
		t.Errorf("sleep 3104, left behind by an agent that exited, outlived it: pids %v", p)
	}
}
