package chamber

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/flock"
	"github.com/cryochamber/cryochamber/timer"
)

// TestPruneKeepsCopiesItCannotProveUnused: old copies found unused long ago, but the timer
// manager cannot be asked what it runs (here it cannot be reached; launchd and Slurm cannot say
// it at all): every copy stays, and the warning says why. The end-to-end test of what is
// removed, against a real user manager, is TestPinnedCopiesPruned.
func TestPruneKeepsCopiesItCannotProveUnused(t *testing.T) {
	now := time.Now().Add(30 * 24 * time.Hour)
	r := testRunner(t, "", now)
	var stderr bytes.Buffer
	r.env.Stderr = &stderr
	bin := filepath.Join(r.env.StateDir, "bin")
	asked := false
	r.env.OpenBackend = func(context.Context, string) (timer.Backend, error) {
		// The looks take their time (here the manager's) without bin/.lock, which a wake's
		// re-pin waits for: a prune stopped with Ctrl-Z must not hang the wakes.
		asked = true
		if flock.Held(filepath.Join(bin, binLock)) {
			t.Error("the prune holds bin/.lock while it asks the timer manager")
		}
		return nil, errors.New("no user manager")
	}
	lock, err := r.store.tryLock()
	if err != nil {
		t.Fatal(err)
	}
	r.lock = lock
	defer lock.Unlock()
	marks := map[string]time.Time{}
	var copies []string
	for i := 0; i < 5; i++ {
		src := filepath.Join(t.TempDir(), "cryochamber")
		if err := os.WriteFile(src, []byte(fmt.Sprintf("build %d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
		cp, err := pinBinary(r.env.StateDir, src, now.Add(-10*24*time.Hour)) // made long ago
		if err != nil {
			t.Fatal(err)
		}
		copies = append(copies, cp)
		marks[filepath.Base(filepath.Dir(cp))] = now.Add(-10 * 24 * time.Hour)
	}
	data, _ := json.Marshal(marks)
	if err := os.WriteFile(filepath.Join(bin, pruneMarks), data, 0o600); err != nil {
		t.Fatal(err)
	}
	r.pruneDue = true
	r.pruneCopies()
	for _, cp := range copies {
		if _, err := os.Stat(cp); err != nil {
			t.Errorf("%s removed though the manager could not say what it runs: %v", cp, err)
		}
	}
	if !asked {
		t.Error("the prune never asked the timer manager: the test does not try what it says")
	}
	if !strings.Contains(stderr.String(), "are kept") {
		t.Errorf("no warning: %q", stderr.String())
	}
}

func TestCopyName(t *testing.T) {
	for name, want := range map[string]bool{
		"0123456789abcdef": true, "0123456789ABCDEF": false, "0123456789abcde": false,
		".prune-0123456789abcdef": false, ".lock": false, "0123456789abcdeg": false,
	} {
		if got := copyName(name); got != want {
			t.Errorf("copyName(%q) = %v, want %v", name, got, want)
		}
	}
}
