package confined

import (
	"os"
	"path/filepath"
	"testing"
)

// A CreateNew killed between its link(2) and the removal of its temporary name leaves one file
// under two names. The next open removes the stray temporary name and opens the file; a file
// with a third name (one may be outside the chamber) or another name that is not our temporary
// pattern stays refused, and the error names the temporary name when there is one.
func TestStrayTemporaryNameIsSettled(t *testing.T) {
	d, base := setup(t)
	ch := filepath.Join(base, "chamber")
	must(t, os.WriteFile(filepath.Join(ch, "msg.md"), []byte("hello"), 0o600))
	must(t, os.Link(filepath.Join(ch, "msg.md"), filepath.Join(ch, ".msg.md.tmp-0123456789ab")))
	if b, err := d.ReadFile("msg.md", 100); err != nil || string(b) != "hello" {
		t.Fatalf("read of a message with a stray temporary name: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(ch, ".msg.md.tmp-0123456789ab")); !os.IsNotExist(err) {
		t.Errorf("the stray temporary name is still there: %v", err)
	}

	// Three names: refused, nothing removed, the error names the temporary name.
	must(t, os.Link(filepath.Join(ch, "msg.md"), filepath.Join(ch, ".msg.md.tmp-00000000aaaa")))
	must(t, os.Link(filepath.Join(ch, "msg.md"), filepath.Join(base, "elsewhere")))
	_, err := d.ReadFile("msg.md", 100)
	want := "msg.md is a hard link (one file with 3 names, one of them .msg.md.tmp-00000000aaaa, the temporary name of a write that was cut short): refused (remove .msg.md.tmp-00000000aaaa)"
	if err == nil || err.Error() != want {
		t.Errorf("three names: %v, want %q", err, want)
	}
	if _, err := os.Lstat(filepath.Join(ch, ".msg.md.tmp-00000000aaaa")); err != nil {
		t.Errorf("a name of a file with three names was removed: %v", err)
	}

	// Two names, the other not our pattern: refused as before, nothing removed.
	must(t, os.WriteFile(filepath.Join(ch, "b.md"), []byte("b"), 0o600))
	must(t, os.Link(filepath.Join(ch, "b.md"), filepath.Join(ch, ".b.md.tmp-zzzz")))
	if _, err := d.ReadFile("b.md", 100); err == nil {
		t.Error("a file with a second name that is not a temporary name of ours was opened")
	}
	if _, err := os.Lstat(filepath.Join(ch, ".b.md.tmp-zzzz")); err != nil {
		t.Errorf("a name that is not ours was removed: %v", err)
	}
}
