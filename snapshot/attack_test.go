package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// TestRestoreNeverWritesThroughASymlink: after a snapshot holding dir/file, the session
// replaces dir with a symlink to a directory outside the chamber (absolute and relative);
// the rollback (with and without the snapshot of the present taken first) writes nothing
// outside the chamber.
func TestRestoreNeverWritesThroughASymlink(t *testing.T) {
	git := gitPath(t)
	for _, tc := range []struct {
		name    string
		present bool
		rel     bool
	}{{"abs-present", true, false}, {"abs-nopresent", false, false}, {"rel-present", true, true}, {"rel-nopresent", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			dir, outside, state := filepath.Join(top, "chamber"), filepath.Join(top, "home"), t.TempDir()
			os.MkdirAll(dir, 0o755)
			os.MkdirAll(outside, 0o755)
			write(t, dir, "dir/file", "from the snapshot\n", 0o644)
			write(t, dir, "dir/sub/deep", "deep\n", 0o755)
			write(t, dir, "link", "was a file\n", 0o644)
			r, err := Open(filepath.Join(state, "snapshots"), git)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
			e1 := take(t, r, dir, Options{}, Request{Kind: KindSession, Session: 1, Now: now})
			os.RemoveAll(filepath.Join(dir, "dir"))
			os.Remove(filepath.Join(dir, "link"))
			target := outside
			if tc.rel {
				target = "../home"
			}
			if err := os.Symlink(target, filepath.Join(dir, "dir")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, "link"), filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			if tc.present {
				take(t, r, dir, Options{}, Request{Kind: KindPresent, Session: 1, Now: now})
			}
			fs, err := confined.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			res, err := r.Restore(context.Background(), fs, Options{}, e1.Tree)
			t.Logf("restore: %+v, %v", res, err)
			ents, _ := os.ReadDir(outside)
			for _, e := range ents {
				t.Errorf("the rollback wrote outside the chamber: %s", e.Name())
			}
		})
	}
}
