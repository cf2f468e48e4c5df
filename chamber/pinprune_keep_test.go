package chamber

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/flock"
)

// TestPinDoesNotWaitForAStoppedPrune: bin/.lock held without end (a prune stopped with Ctrl-Z
// in the instant it holds it): a wake's save, which re-pins its build (repin.go), still
// finishes; it hands out no copy (the prune may be renaming it away), says so, and the dead-man
// runs the binary itself until a later command can copy it. Before, pinBinary waited for the
// lock without limit, and every re-pinning wake of every chamber hung.
func TestPinDoesNotWaitForAStoppedPrune(t *testing.T) {
	r, _ := repinRunner(t, "new build")
	var stderr bytes.Buffer
	r.env.Stderr = &stderr
	held, err := flock.Try(filepath.Join(r.env.StateDir, "bin", binLock))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	done := make(chan error, 1)
	go func() { done <- r.save() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute): // a hang, not a speed: the wait is bounded by binLockWait
		t.Fatal("the save waited for bin/.lock without end")
	}
	if !strings.Contains(stderr.String(), "cannot copy") || !strings.Contains(stderr.String(), "held by another process") {
		t.Errorf("no warning that the copy could not be made: %q", stderr.String())
	}
	if p := readPin(t, r); p.Copy != "" {
		t.Errorf("a copy was handed out while bin/.lock was held: %+v", p)
	}
}

// TestPinBinarySetsTheCommandsTime: a copy's time, made or handed out again, is the command's
// clock (Env.Now), the clock the prune compares it with: a command whose clock is moved
// (CRYOCHAMBER_NOW) and one whose clock is not agree on how old a copy is.
func TestPinBinarySetsTheCommandsTime(t *testing.T) {
	state := t.TempDir()
	src := filepath.Join(t.TempDir(), "cryochamber")
	if err := os.WriteFile(src, []byte("a build"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{t0.Add(-48 * time.Hour), t0} { // made, then handed out again
		cp, err := pinBinary(state, src, at)
		if err != nil {
			t.Fatal(err)
		}
		if got := copyTime(filepath.Join(state, "bin"), filepath.Base(filepath.Dir(cp))); !got.Equal(at) {
			t.Errorf("the copy's time is %v, want the command's %v", got, at)
		}
	}
}

// TestChamberFilesDoubt: an entry of chambers/ that is not a readable directory (a symlink
// loop, a file, a dangling symlink) or a chamber's file that cannot be read is an error, so
// that the prune keeps every copy; before, all but an unreadable file of a real directory were
// skipped without a word. A symlink to a chamber's directory is read through.
func TestChamberFilesDoubt(t *testing.T) {
	setup := func(t *testing.T) (state, root string) {
		state = t.TempDir()
		root = filepath.Join(state, "chambers")
		ok := filepath.Join(root, "aaaa")
		if err := os.MkdirAll(ok, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ok, pinName), []byte(`{"binary_copy":"/s/bin/0123456789abcdef/cryochamber"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return state, root
	}
	t.Run("readable", func(t *testing.T) {
		state, root := setup(t)
		elsewhere := filepath.Join(t.TempDir(), "moved")
		if err := os.MkdirAll(elsewhere, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(elsewhere, stateName), []byte(`{"binary":"/s/bin/fedcba9876543210/cryochamber"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(root, "bbbb")); err != nil {
			t.Fatal(err)
		}
		text, blind, err := chamberFiles(state)
		if err != nil || blind || !strings.Contains(text, "0123456789abcdef") || !strings.Contains(text, "fedcba9876543210") {
			t.Fatalf("chamberFiles = %q, %v, %v", text, blind, err)
		}
	})
	for name, mk := range map[string]func(root string) error{
		"symlink loop":     func(root string) error { return os.Symlink(filepath.Join(root, "loop"), filepath.Join(root, "loop")) },
		"dangling symlink": func(root string) error { return os.Symlink("/nonexistent/chamber", filepath.Join(root, "gone")) },
		"a file":           func(root string) error { return os.WriteFile(filepath.Join(root, "stray"), []byte("x"), 0o600) },
		"pin.json a directory": func(root string) error {
			return os.MkdirAll(filepath.Join(root, "cccc", pinName), 0o700)
		},
		"state.json unparsable": func(root string) error {
			if err := os.MkdirAll(filepath.Join(root, "dddd"), 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, "dddd", stateName), []byte("{half"), 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			state, root := setup(t)
			if err := mk(root); err != nil {
				t.Fatal(err)
			}
			if text, _, err := chamberFiles(state); err == nil {
				t.Errorf("chamberFiles = %q, nil; want an error (any doubt keeps every copy)", text)
			}
		})
	}
}

// TestPruneBlindSpots: a chamber on Slurm or launchd anywhere in the state directory keeps
// every copy, whichever chamber prunes: a job script in $STATE/slurm, or a chamber whose state
// or accepted configuration names such a backend. The end-to-end test, with a real user manager
// and a real chamber pruning, is TestPinnedCopiesKeptBesideSlurm.
func TestPruneBlindSpots(t *testing.T) {
	state := t.TempDir()
	if blind, err := slurmJobs(state); blind || err != nil {
		t.Fatalf("slurmJobs with no $STATE/slurm = %v, %v", blind, err)
	}
	jobs := filepath.Join(state, "slurm", "0123456789abcdef")
	if err := os.MkdirAll(jobs, 0o700); err != nil {
		t.Fatal(err)
	}
	if blind, err := slurmJobs(state); blind || err != nil {
		t.Fatalf("slurmJobs with empty directories = %v, %v", blind, err)
	}
	if err := os.WriteFile(filepath.Join(jobs, "fallback.sh"), []byte("#!/bin/sh\nexec /s/bin/0123456789abcdef/cryochamber\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if blind, err := slurmJobs(state); !blind || err != nil {
		t.Fatalf("slurmJobs with a job script = %v, %v", blind, err)
	}
	for _, c := range []struct {
		file, content string
		blind         bool
	}{
		{stateName, `{"version":1,"backend":"systemd"}`, false},
		{stateName, `{"version":1}`, false},
		{stateName, `{"version":1,"backend":"slurm"}`, true},
		{stateName, `{"version":1,"backend":"launchd"}`, true},
		{acceptedConfig, "agent = \"claude\"\n", false},
		{acceptedConfig, "agent = \"claude\"\nbackend = \"slurm\"\n", true},
		{acceptedConfig, "backend = \"launchd\"\n", true},
	} {
		state := t.TempDir()
		dir := filepath.Join(state, "chambers", "aaaa")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, blind, err := chamberFiles(state); blind != c.blind || err != nil {
			t.Errorf("%s %q: blind = %v, %v; want %v", c.file, c.content, blind, err, c.blind)
		}
	}
}
