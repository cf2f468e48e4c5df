package snapshot

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

func gitPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	return p
}

func write(t *testing.T, dir, name, data string, perm os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}

func take(t *testing.T, r *Repo, dir string, opt Options, req Request) *Entry {
	t.Helper()
	fs, err := confined.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	e, err := r.Take(context.Background(), fs, opt, req)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestTakeDiffRestore: a snapshot, changes (edit, delete, rename, a binary file, a symlink, a
// subdirectory), a second snapshot; the changes are listed exactly; restoring the first puts
// every byte back (the tree of a new snapshot is the first one's), and leaves alone what
// snapshots never hold.
func TestTakeDiffRestore(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	opt := Options{Own: []string{"cryo.log", ".cryo"}, Exclude: []string{"*.tmp"}, MaxFile: 1 << 20}
	write(t, dir, "plan.md", "the plan\n", 0o644)
	write(t, dir, "NOTES.md", "notes 1\n", 0o644)
	write(t, dir, "old.txt", "old\n", 0o644)
	write(t, dir, "sub/a.txt", "a\n", 0o644)
	write(t, dir, "run.sh", "#!/bin/sh\n", 0o755)
	write(t, dir, "cryo.log", "log\n", 0o600)
	write(t, dir, "x.tmp", "scratch\n", 0o644)
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	e1 := take(t, r, dir, opt, Request{Kind: KindSession, Session: 1, Now: now})
	if e := take(t, r, dir, opt, Request{Kind: KindBefore, Session: 2, Now: now, IfChanged: true}); e != nil {
		t.Fatalf("nothing changed, but a snapshot was taken: %+v", e)
	}

	write(t, dir, "NOTES.md", "notes 2\n", 0o644)
	os.Remove(filepath.Join(dir, "old.txt"))
	os.Rename(filepath.Join(dir, "sub/a.txt"), filepath.Join(dir, "sub/b.txt"))
	write(t, dir, "bin.dat", "\x00\x01\x02binary\xff", 0o644)
	write(t, dir, "deep/er/c.txt", "c\n", 0o644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	write(t, dir, "big.bin", strings.Repeat("x", 2<<20), 0o644)
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	write(t, dir, "cryo.log", "log\nmore\n", 0o600)
	e2 := take(t, r, dir, opt, Request{Kind: KindSession, Session: 2, Now: now.Add(time.Hour)})

	ch, err := r.Changes(context.Background(), e1.Tree, e2.Tree)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ch {
		got = append(got, c.Status+" "+c.From+">"+c.Path)
	}
	want := "modified >NOTES.md|added >bin.dat|added >deep/er/c.txt|added >link|deleted >old.txt|renamed sub/a.txt>sub/b.txt"
	if strings.Join(got, "|") != want {
		t.Fatalf("changes:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	if e2.Changed != 6 {
		t.Errorf("files_changed = %d, want 6", e2.Changed)
	}
	skipped := map[string]string{}
	for _, s := range e2.Skipped {
		skipped[s.Path] = s.Why
	}
	if !strings.Contains(skipped["big.bin"], "snapshot_max_file") || skipped["fifo"] != "a FIFO" || len(skipped) != 2 {
		t.Errorf("skipped = %v, want big.bin and fifo", skipped)
	}
	var patch bytes.Buffer
	if err := r.Patch(context.Background(), &patch, e1.Tree, e2.Tree); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(patch.String(), "-notes 1\n+notes 2\n") || !strings.Contains(patch.String(), "Binary files /dev/null and b/bin.dat differ") {
		t.Errorf("patch:\n%s", patch.String())
	}

	fs, _ := confined.Open(dir)
	res, err := r.Restore(context.Background(), fs, opt, e1.Tree)
	fs.Close()
	if err != nil || len(res.Problems) > 0 {
		t.Fatalf("restore: %v %v", err, res)
	}
	e3 := take(t, r, dir, opt, Request{Kind: KindRollback, Session: 2, To: 1, Now: now.Add(2 * time.Hour)})
	if e3.Tree != e1.Tree {
		t.Fatalf("after the restore the tree is %s, want %s (session 1's)", e3.Tree, e1.Tree)
	}
	for name, want := range map[string]string{"NOTES.md": "notes 1\n", "old.txt": "old\n", "sub/a.txt": "a\n", "cryo.log": "log\nmore\n", "x.tmp": "scratch\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q %v, want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"bin.dat", "deep", "link", "sub/b.txt"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s is still there after the restore", name)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	// Undo: back to session 2's files.
	fs, _ = confined.Open(dir)
	if _, err := r.Restore(context.Background(), fs, opt, e2.Tree); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	e4 := take(t, r, dir, opt, Request{Kind: KindRollback, Session: 2, To: 2, Now: now.Add(3 * time.Hour)})
	if e4.Tree != e2.Tree {
		t.Fatalf("the undo left tree %s, want %s", e4.Tree, e2.Tree)
	}
	if tgt, err := os.Readlink(filepath.Join(dir, "link")); err != nil || tgt != "/etc/passwd" {
		t.Errorf("link: %q %v", tgt, err)
	}
}

// TestChamberGitIsNeverRun: a chamber that is a git repository whose hooks and fsmonitor
// write a marker file: snapshots, diffs and restores run none of them, and never hold .git.
func TestChamberGitIsNeverRun(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	marker := filepath.Join(state, "ran")
	cmd := exec.Command(git, "init", "-q", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	hook := "#!/bin/sh\necho ran \"$0\" >> " + marker + "\n"
	for _, h := range []string{"pre-commit", "post-commit", "post-checkout", "reference-transaction", "pre-auto-gc", "post-rewrite", "fsmonitor"} {
		write(t, dir, ".git/hooks/"+h, hook, 0o755)
	}
	f, _ := os.OpenFile(filepath.Join(dir, ".git/config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("[core]\n\tfsmonitor = " + filepath.Join(dir, ".git/hooks/fsmonitor") + "\n\thooksPath = .git/hooks\n[diff]\n\texternal = " + filepath.Join(dir, ".git/hooks/fsmonitor") + "\n")
	f.Close()
	write(t, dir, "a.txt", "a\n", 0o644)
	opt := Options{Own: []string{".git"}, MaxFile: 1 << 20}
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e1 := take(t, r, dir, opt, Request{Kind: KindSession, Session: 1, Now: now})
	write(t, dir, "a.txt", "b\n", 0o644)
	e2 := take(t, r, dir, opt, Request{Kind: KindSession, Session: 2, Now: now})
	var b bytes.Buffer
	if err := r.Patch(context.Background(), &b, e1.Tree, e2.Tree); err != nil {
		t.Fatal(err)
	}
	fs, _ := confined.Open(dir)
	if _, err := r.Restore(context.Background(), fs, opt, e1.Tree); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	if err := r.Compact(context.Background(), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(marker); err == nil {
		t.Fatalf("a hook of the chamber's repository ran: %s", data)
	}
	if fls, _ := r.files(context.Background(), e2.Tree); len(fls) != 1 {
		t.Fatalf("the snapshot holds %v, want a.txt only", fls)
	}
	// The marker hook does work when git itself is run in the chamber: the test can fail.
	c := exec.Command(git, "-C", dir, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--allow-empty", "-m", "x")
	c.Env = append(os.Environ(), "HOME="+state)
	_ = c.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: the chamber's hook did not run under git itself, so this test proves nothing: %v", err)
	}
}

// TestCompactDropsOldSnapshots: beyond the retention, snapshots go and their objects are pruned.
func TestCompactDropsOldSnapshots(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	opt := Options{MaxFile: 1 << 20, Keep: 48 * time.Hour}
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var first *Entry
	for i := 0; i < 10; i++ {
		write(t, dir, "f.txt", strings.Repeat("unique ", 100)+string(rune('a'+i)), 0o644)
		e := take(t, r, dir, opt, Request{Kind: KindSession, Session: i + 1, Now: t0.Add(time.Duration(i) * 24 * time.Hour)})
		if first == nil {
			first = e
		}
	}
	es, _ := r.Entries()
	if len(es) > 4 || es[len(es)-1].Session != 10 {
		t.Fatalf("after compaction: %d entries (last %+v), want at most the last 3 days", len(es), es[len(es)-1])
	}
	if _, err := r.Git(context.Background(), nil, "cat-file", "-e", first.Commit); err == nil {
		t.Fatalf("the first snapshot's commit is still in the repository after compaction")
	}
	// Sessions that change nothing name the commit before them; dropping that one's entry
	// must keep the commit (and so its tree) while a kept entry names it.
	var last *Entry
	for i := 10; i < 16; i++ {
		last = take(t, r, dir, opt, Request{Kind: KindSession, Session: i + 1, Now: t0.Add(time.Duration(i) * 24 * time.Hour)})
	}
	es, _ = r.Entries()
	if es[0].Commit != last.Commit {
		t.Fatalf("want the kept entries to share the commit of a dropped one: %+v", es)
	}
	if _, err := r.Git(context.Background(), nil, "cat-file", "-e", last.Tree); err != nil {
		t.Fatalf("the tree of the kept snapshots was pruned: %v", err)
	}
	if refs, _ := r.Git(context.Background(), nil, "for-each-ref", "refs/snapshots/"); strings.Count(string(refs), "\n") != 1 {
		t.Fatalf("refs after compaction (want the one of the shared commit):\n%s", refs)
	}
}

// TestRestoreTypeChanges: a file that became a directory, a directory that became a symlink,
// and back, both ways.
func TestRestoreTypeChanges(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	opt := Options{MaxFile: 1 << 20}
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	write(t, dir, "x", "a file\n", 0o644)
	write(t, dir, "d/inner.txt", "inner\n", 0o644)
	e1 := take(t, r, dir, opt, Request{Kind: KindSession, Session: 1, Now: now})
	os.Remove(filepath.Join(dir, "x"))
	write(t, dir, "x/y.txt", "now a directory\n", 0o644)
	os.RemoveAll(filepath.Join(dir, "d"))
	os.Symlink("x", filepath.Join(dir, "d"))
	e2 := take(t, r, dir, opt, Request{Kind: KindSession, Session: 2, Now: now})
	for _, want := range []*Entry{e1, e2, e1} {
		fs, _ := confined.Open(dir)
		res, err := r.Restore(context.Background(), fs, opt, want.Tree)
		fs.Close()
		if err != nil || len(res.Problems) > 0 {
			t.Fatalf("restore: %v %v", err, res.Problems)
		}
		got := take(t, r, dir, opt, Request{Kind: KindRollback, Now: now})
		if got.Tree != want.Tree {
			t.Fatalf("restored tree %s, want %s", got.Tree, want.Tree)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "d/inner.txt")); err != nil || string(b) != "inner\n" {
		t.Errorf("d/inner.txt: %q %v", b, err)
	}
}

// TestPackedObjectsNotRewritten: once gc packed the repository, a snapshot of an unchanged
// chamber writes its commit only, not a loose copy of every tree (one fsync each).
func TestPackedObjectsNotRewritten(t *testing.T) {
	git := gitPath(t)
	dir, state := t.TempDir(), t.TempDir()
	for i := 0; i < 20; i++ {
		write(t, dir, filepath.Join("d"+string(rune('a'+i)), "f.txt"), "x\n", 0o644)
	}
	os.Symlink("da", filepath.Join(dir, "link"))
	opt := Options{MaxFile: 1 << 20}
	r, err := Open(filepath.Join(state, "snapshots"), git)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	take(t, r, dir, opt, Request{Kind: KindSession, Session: 1, Now: now})
	if _, err := r.Git(context.Background(), nil, "gc", "--quiet", "--prune=now"); err != nil {
		t.Fatal(err)
	}
	loose := func() int {
		n := 0
		filepath.Walk(filepath.Join(r.Dir(), "objects"), func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
				n++
			}
			return nil
		})
		return n
	}
	if n := loose(); n != 0 {
		t.Fatalf("%d loose objects after gc", n)
	}
	take(t, r, dir, opt, Request{Kind: KindSession, Session: 2, Now: now})
	if n := loose(); n != 0 {
		t.Fatalf("a snapshot of an unchanged chamber wrote %d loose objects, want none", n)
	}
	write(t, dir, "da/f.txt", "changed\n", 0o644)
	take(t, r, dir, opt, Request{Kind: KindSession, Session: 3, Now: now})
	if n := loose(); n != 4 {
		t.Fatalf("a snapshot of one changed file wrote %d loose objects, want 4 (its blob, its tree, the root, the commit)", n)
	}
}
