package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
)

// update rewrites the golden files that the scripts' `cmp` commands compare with (TestScripts;
// docs/BAD-INPUTS.md is internal/e2e/binary's: go test ./internal/e2e/binary -run
// TestBadInputCatalogue -update).
var update = flag.Bool("update", false, "rewrite golden files instead of comparing with them")

// TestMain builds the cryochamber binary once (internal/e2e/fixture): the scripts run it as
// `cryo`, the end-to-end tests of this package run it directly, and the timers they arm run it.
func TestMain(m *testing.M) { fixture.Main(m) }

// runCLI calls run() in process, the way main does.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"cryochamber"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestStartRefusesNewlineInPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bad\nchamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plan.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "start", filepath.Join(dir, "plan.md"))
	if code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
	}
	for _, want := range []string{"cryochamber: chamber path", "cannot be used in a timer unit", "hint: move the chamber"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("start on a refused path created files: %v", ents)
	}
	// The same path is refused for init, before anything is written.
	code, _, stderr = runCLI(t, "init", filepath.Join(dir, "sub"))
	if code != exitUsage || !strings.Contains(stderr, "cannot be used in a timer unit") {
		t.Fatalf("init: exit %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); err == nil {
		t.Error("init created the directory anyway")
	}
}

func TestHelpDocumentsExitStatus(t *testing.T) {
	code, out, _ := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	for _, want := range []string{"EXIT STATUS", "0    done", "1    refused or failed", "2    usage or configuration error", "130  interrupted", "[CRYO:EXIT 0]", "start", "wake", "status", "log", "cancel", "validate"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	code, out, _ = runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "cryochamber version ") {
		t.Fatalf("--version: %d %q", code, out)
	}
}

func TestInitNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plan.md"), []byte("my plan"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "init", dir)
	if code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	if !strings.Contains(out, "kept     "+filepath.Join(dir, "plan.md")) {
		t.Errorf("init did not say it kept plan.md:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "plan.md")); string(b) != "my plan" {
		t.Errorf("plan.md overwritten: %q", b)
	}
	for _, p := range []string{"cryo.toml", "NOTES.md", "messages/inbox/archive", "messages/outbox"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("init did not create %s", p)
		}
	}
	// A second init changes nothing.
	before, _ := os.ReadFile(filepath.Join(dir, "cryo.toml"))
	if code, _, _ := runCLI(t, "init", dir); code != 0 {
		t.Fatal("second init failed")
	}
	after, _ := os.ReadFile(filepath.Join(dir, "cryo.toml"))
	if !bytes.Equal(before, after) {
		t.Error("second init changed cryo.toml")
	}
}

func TestCheckpointHookCounts(t *testing.T) {
	if checkpointHook("", "", "") != nil || checkpointHook("", "armed", "") != nil {
		t.Fatal("a hook without its variables must be nil")
	}
	for _, c := range []struct {
		spec  string
		calls []string
		want  int // index of the call that reports reaching it, -1 none
	}{
		{"armed", []string{"claimed", "armed", "armed"}, 1},
		{"state-temp:3", []string{"state-temp", "claimed", "state-temp", "state-temp", "state-temp"}, 3},
		{"state-temp:x", []string{"state-temp", "state-temp"}, 0},
		{"ended", []string{"claimed", "header"}, -1},
	} {
		reached := reachedNth(c.spec)
		got := -1
		for i, name := range c.calls {
			if reached(name) {
				if got >= 0 {
					t.Errorf("%s: reached twice (calls %d and %d)", c.spec, got, i)
				}
				got = i
			}
		}
		if got != c.want {
			t.Errorf("%s over %v: reached at call %d, want %d", c.spec, c.calls, got, c.want)
		}
	}
}

// TestCheckpointHookPauses: a paused wake writes its PID to the pause file and goes on only once
// the file is removed.
func TestCheckpointHookPauses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "paused")
	hook := checkpointHook("", "ended", file)
	hook("claimed") // another point: no pause
	if _, err := os.Stat(file); err == nil {
		t.Fatal("paused at the wrong point")
	}
	done := make(chan struct{})
	go func() {
		hook("ended")
		close(done)
	}()
	for i := 0; ; i++ {
		if data, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(os.Getpid()) {
			break
		}
		if i > 1000 {
			t.Fatal("the pause file did not appear with the PID")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the hook returned while the pause file was still there")
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hook did not go on after the pause file was removed")
	}
}
