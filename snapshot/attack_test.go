package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestHostileNames: names that are options to git ("-rf", "--output=x"), names with a newline,
// a tab, an escape sequence, a FIFO, symlink loops and a dangling symlink, a directory 200
// deep: the snapshot is taken without blocking, the changes list each name exactly, and a
// rollback puts every file back (the FIFO is left out and listed, never opened).
func TestHostileNames(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	names := []string{"-rf", "--output=x", "a\nb", "tab\tname", "\x1b]0;title\x07", "sub/-n", "sub/.git/config"}
	for _, n := range names {
		write(t, dir, n, "content of "+n+"\n", 0o644)
	}
	deep := strings.Repeat("d/", 200) + "leaf"
	write(t, dir, deep, "deep\n", 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("loop", filepath.Join(dir, "loop"))
	os.Symlink("l2", filepath.Join(dir, "l1"))
	os.Symlink("l1", filepath.Join(dir, "l2"))
	os.Symlink("/nonexistent/x", filepath.Join(dir, "dangling"))
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	e1 := take(t, r, dir, Options{}, Request{Kind: KindSession, Session: 1, Now: now})
	if len(e1.Skipped) != 1 || e1.Skipped[0].Path != "fifo" {
		t.Errorf("skipped %+v, want the FIFO", e1.Skipped)
	}
	ch, err := r.Changes(context.Background(), EmptyTree, e1.Tree)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range ch {
		got[c.Path] = true
	}
	for _, n := range append(names, deep, "loop", "l1", "l2", "dangling") {
		if !got[n] {
			t.Errorf("the changes do not list %q", n)
		}
	}
	// The session removes everything; the rollback puts it back.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "fifo" {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	take(t, r, dir, Options{}, Request{Kind: KindPresent, Session: 1, Now: now})
	fs, err := confined.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	res, err := r.Restore(context.Background(), fs, Options{}, e1.Tree)
	if err != nil || len(res.Problems) > 0 {
		t.Fatalf("restore: %+v %v", res, err)
	}
	for _, n := range append(names, deep) {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(b) != "content of "+n+"\n" && n != deep {
			t.Errorf("%q after the rollback: %q %v", n, b, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(dir, "l1")); err != nil || l != "l2" {
		t.Errorf("l1: %q %v", l, err)
	}
}

// TestManySkippedFilesKeepTheIndexReadable: a session that leaves 70,000 FIFOs with long
// names (each is skipped and listed) must not make the snapshot's index line so long that the
// index can no longer be read: that disabled every later diff and rollback.
func TestManySkippedFilesKeepTheIndexReadable(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	write(t, dir, "plan.md", "plan\n", 0o644)
	long := strings.Repeat("f", 240)
	for i := 0; i < 70000; i++ {
		if err := syscall.Mkfifo(filepath.Join(dir, fmt.Sprintf("%s%06d", long, i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	e := take(t, r, dir, Options{}, Request{Kind: KindSession, Session: 1, Now: now})
	if len(e.Skipped) > 1001 {
		t.Errorf("%d skipped files listed, want at most 1000 and a count", len(e.Skipped))
	}
	if last := e.Skipped[len(e.Skipped)-1]; !strings.Contains(last.Why, "more") {
		t.Errorf("the list does not say how many more: %+v", last)
	}
	entries, err := r.Entries()
	if err != nil || len(entries) != 1 {
		t.Fatalf("the index after the snapshot: %d entries, %v", len(entries), err)
	}
}

// TestEntriesSkipOverlongLine: an index line longer than the reader takes (one an earlier
// release wrote) is skipped like a torn one; the snapshots after it are still listed.
func TestEntriesSkipOverlongLine(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	write(t, dir, "plan.md", "plan\n", 0o644)
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	take(t, r, dir, Options{}, Request{Kind: KindSession, Session: 1, Now: now})
	f, err := os.OpenFile(filepath.Join(r.Dir(), indexName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":2,"commit":"x","skipped":[{"path":"` + strings.Repeat("f", 17<<20) + `"}]}` + "\n")
	f.Close()
	write(t, dir, "plan.md", "plan 2\n", 0o644)
	take(t, r, dir, Options{}, Request{Kind: KindSession, Session: 3, Now: now})
	entries, err := r.Entries()
	if err != nil || len(entries) != 2 || entries[1].Session != 3 {
		t.Fatalf("entries %d, %v", len(entries), err)
	}
}
