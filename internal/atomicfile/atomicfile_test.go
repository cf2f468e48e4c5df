package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndSetsMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "new" {
		t.Fatalf("content = %q, want %q", got, "new")
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestWriteFailureLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "state.json") // parent does not exist
	if err := Write(p, []byte("x"), 0o600); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
	// A target that is a directory cannot be replaced by rename: the temp file must go.
	target := filepath.Join(dir, "isdir")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "keep"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("x"), 0o600); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary file left behind after a failed rename: %v", ents)
	}
}

// TestWriteNoSyncReplaces: WriteNoSync replaces the file atomically with the mode asked for,
// calls its hook before the rename (the old content still there), and leaves no temporary file.
func TestWriteNoSyncReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	hooked := false
	err := WriteNoSync(p, []byte("new"), 0o600, func() {
		hooked = true
		if got, _ := os.ReadFile(p); string(got) != "old" {
			t.Errorf("before the rename the file holds %q, want the old content", got)
		}
	})
	if err != nil || !hooked {
		t.Fatalf("WriteNoSync = %v, hook called %v", err, hooked)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "new" {
		t.Fatalf("content = %q (%v), want %q", got, err, "new")
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}
