package chamber

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// repinRunner is a runner whose pin names the copy of an "old" build, with the binary at
// env.Binary (the "new" build) given by content.
func repinRunner(t *testing.T, newBuild string) (r *runner, oldCopy string) {
	t.Helper()
	r = testRunner(t, "", t0)
	bin := filepath.Join(t.TempDir(), "cryochamber")
	if err := os.WriteFile(bin, []byte("old build"), 0o755); err != nil {
		t.Fatal(err)
	}
	oldCopy, err := pinBinary(r.env.StateDir, bin, t0)
	if err != nil {
		t.Fatal(err)
	}
	p := pinFile{Version: 1, Binary: bin, Copy: oldCopy, CopyOf: stampOf(bin)}
	data, _ := json.Marshal(p)
	if err := r.store.write(pinName, data, nil); err != nil {
		t.Fatal(err)
	}
	// The upgrade in place: a new file renamed over the old name.
	if err := os.WriteFile(bin+".new", []byte(newBuild), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	r.env.Binary, r.st.Binary = bin, bin
	return r, oldCopy
}

func readPin(t *testing.T, r *runner) pinFile {
	t.Helper()
	data, err := r.store.read(pinName, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var p pinFile
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRepinSelf: the build that writes the state makes itself the dead-man's copy (once per
// command, and only when its file is not the one copied); when it cannot be copied, the
// dead-man runs the binary the wake timer runs rather than the older copy, and the next
// command tries again.
func TestRepinSelf(t *testing.T) {
	t.Run("upgraded in place", func(t *testing.T) {
		r, old := repinRunner(t, "new build")
		if err := r.save(); err != nil {
			t.Fatal(err)
		}
		p := readPin(t, r)
		if p.Copy == old || p.CopyOf != stampOf(r.env.Binary) {
			t.Fatalf("pin after the new build's save: %+v (old copy %s)", p, old)
		}
		if got, _ := os.ReadFile(p.Copy); string(got) != "new build" {
			t.Errorf("the copy holds %q", got)
		}
		if got := r.fallbackBinary(); got != p.Copy {
			t.Errorf("the dead-man runs %s, want %s", got, p.Copy)
		}
		if got, _ := os.ReadFile(old); string(got) != "old build" {
			t.Errorf("the old copy (which timers armed earlier may still name) was changed: %q", got)
		}
	})
	t.Run("the same build", func(t *testing.T) {
		r, old := repinRunner(t, "old build")
		r.repinSelf()
		if p := readPin(t, r); p.Copy != old || p.CopyOf != stampOf(r.env.Binary) {
			t.Errorf("pin: %+v, want the same copy %s with the new stamp", p, old)
		}
	})
	t.Run("the dead-man itself", func(t *testing.T) {
		r, old := repinRunner(t, "new build")
		r.env.Binary = old
		before := readPin(t, r)
		r.repinSelf()
		if p := readPin(t, r); p.Copy != before.Copy || p.CopyOf != before.CopyOf {
			t.Errorf("the copy re-pinned itself: %+v", p)
		}
	})
	t.Run("a read-only command", func(t *testing.T) {
		r, old := repinRunner(t, "new build")
		r.unlocked = true
		if got := r.fallbackBinary(); got != old {
			t.Errorf("an unlocked runner re-pinned: the dead-man runs %s", got)
		}
	})
	t.Run("the copy cannot be made", func(t *testing.T) {
		r, old := repinRunner(t, "new build")
		// bin/<hash> for the new build cannot be made: a file where its directory goes.
		if err := os.RemoveAll(filepath.Join(r.env.StateDir, "bin")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.env.StateDir, "bin"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := r.fallbackBinary(); got != r.env.Binary {
			t.Errorf("the dead-man runs %s (the old copy was %s), want the wake's binary %s", got, old, r.env.Binary)
		}
		if p := readPin(t, r); p.Copy != "" || p.CopyOf == stampOf(r.env.Binary) {
			t.Errorf("pin: %+v, want no copy and the old stamp (so the next command tries again)", p)
		}
		// Room again: the next command copies it.
		if err := os.Remove(filepath.Join(r.env.StateDir, "bin")); err != nil {
			t.Fatal(err)
		}
		r.repinned, r.pins = false, nil
		r.repinSelf()
		if p := readPin(t, r); p.Copy == "" || p.CopyOf != stampOf(r.env.Binary) {
			t.Errorf("the next command did not copy it: %+v", p)
		}
	})
}

// After a re-pin the session's dead-man is armed anew (it would run the replaced copy), and a
// pinned copy run by an older timer never pins itself back.
func TestRepinChangedAndOldCopies(t *testing.T) {
	r, old := repinRunner(t, "new build")
	r.repinSelf()
	if !r.repinChanged {
		t.Error("a re-pin to a new copy does not say the copy changed")
	}
	r2, _ := repinRunner(t, "new build")
	r2.repinSelf()
	r2.repinned, r2.pins, r2.repinChanged = false, nil, false
	r2.repinSelf()
	if r2.repinChanged {
		t.Error("a command whose build is already the copy says it changed")
	}
	// An older copy (the dead-man armed before the re-pin) runs: it leaves the pin alone.
	r.repinned, r.pins, r.repinChanged = false, nil, false
	before := readPin(t, r)
	r.env.Binary = old
	r.repinSelf()
	if after := readPin(t, r); after.Copy != before.Copy || r.repinChanged {
		t.Errorf("the older copy %s pinned itself back: %s -> %s", old, before.Copy, after.Copy)
	}
}
