package timer_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// TestRunTextSeesWhatTheManagerHolds: RunText (what the prune of old pinned copies reads,
// chamber/pinprune.go) names the program of an armed dead-man both from its unit file and as
// the manager holds it: after the file is rewritten without a reload (an arming killed between
// the two), the manager still runs the old program, and RunText still names it.
func TestRunTextSeesWhatTheManagerHolds(t *testing.T) {
	f := newFixture(t)
	c, _ := f.chamber(t, "c")
	old := f.argv(c, "fallback")
	if err := f.b.Arm(ctxT(t), c, timer.Job{Kind: timer.Fallback, At: soon(time.Hour), Argv: old}); err != nil {
		t.Fatal(err)
	}
	text, err := timer.RunText(ctxT(t), f.b)
	if err != nil {
		t.Fatal(err)
	}
	inFile := strings.ReplaceAll(f.bin, "%", "%%") // as a unit file spells it
	if !strings.Contains(text, inFile) || !strings.Contains(text, f.bin) {
		t.Fatalf("RunText does not name %s both from the file and from the manager:\n%s", f.bin, text)
	}
	unit := filepath.Join(f.m.UnitDir, timer.SystemdServiceName(c.ID, timer.Fallback))
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(data), inFile, "/usr/bin/true")), 0o644); err != nil {
		t.Fatal(err)
	}
	if show := f.m.Systemctl(t, "show", "-p", "NeedDaemonReload", timer.SystemdServiceName(c.ID, timer.Fallback)); !strings.Contains(show, "=yes") {
		t.Fatalf("the manager does not hold an older version: %s", show)
	}
	text, err = timer.RunText(ctxT(t), f.b)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, inFile) || !strings.Contains(text, f.bin) {
		t.Errorf("RunText after the rewrite: the file should not name %s, the manager should:\n%s", f.bin, text)
	}
}

// TestRunTextCannotTell: launchd (and Slurm) cannot say what they run as loaded: nothing may be
// removed on their word.
func TestRunTextCannotTell(t *testing.T) {
	be, err := timer.NewLaunchd(ctxT(t), timer.LaunchdOptions{AgentsDir: t.TempDir(), Launchctl: "/bin/false", Localtime: "/etc/localtime", Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if _, err := timer.RunText(ctxT(t), be); !errors.Is(err, timer.ErrCannotTell) {
		t.Errorf("RunText on %s: %v, want ErrCannotTell", be.Name(), err)
	}
}

// TestRunTextReadsDropIns: a drop-in (`systemctl --user edit`'s NAME.service.d/override.conf)
// may set ExecStart= anew, to a pinned copy: RunText names it, so that the prune keeps that
// copy. The unit is the user's own (not cryo*), which the manager's side of RunText never asks.
func TestRunTextReadsDropIns(t *testing.T) {
	f := newFixture(t)
	const copyDir = "0123456789abcdef" // a pinned copy's name
	unit := filepath.Join(f.m.UnitDir, "mine.service")
	if err := os.WriteFile(unit, []byte("[Service]\nExecStart=/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(unit+".d", 0o755); err != nil {
		t.Fatal(err)
	}
	override := "[Service]\nExecStart=\nExecStart=/state/cryochamber/bin/" + copyDir + "/cryochamber fallback\n"
	if err := os.WriteFile(filepath.Join(unit+".d", "override.conf"), []byte(override), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := timer.RunText(ctxT(t), f.b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, copyDir) {
		t.Errorf("RunText does not name the copy a drop-in runs:\n%s", text)
	}
}
