package message

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// A message file with a second name is no message: a hard link to a private key planted in the
// inbox is neither listed nor read.
func TestHardLinkedMessagesAreNotMessages(t *testing.T) {
	base := t.TempDir()
	ch := filepath.Join(base, "chamber")
	if err := os.MkdirAll(filepath.Join(ch, InboxDir), 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(base, "id_ed25519")
	if err := os.WriteFile(key, []byte("PRIVATE KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const planted = "20260101T000000.000000000Z-x-00000000.md"
	if err := os.Link(key, filepath.Join(ch, InboxDir, planted)); err != nil {
		t.Fatal(err)
	}
	fs, err := confined.Open(ch)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	real, err := Write(fs, InboxDir, &Message{From: "alice", Time: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), Body: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	names, err := Names(fs, InboxDir)
	if err != nil || len(names) != 1 || names[0] != real {
		t.Fatalf("Names = %v %v, want only %s", names, err, real)
	}
	if _, err := Read(fs, InboxDir, planted); err == nil {
		t.Fatal("Read of a hard link to a file outside succeeded")
	}
	// A message caught between its link(2) and the removal of its temporary name, or left so by
	// a writer that was killed there (issue 23, item 2): listed, and the stray name removed
	// (before, it was left out for good, and never read).
	tmp := filepath.Join(ch, InboxDir, "."+real+".tmp-000000000000")
	if err := os.Link(filepath.Join(ch, InboxDir, real), tmp); err != nil {
		t.Fatal(err)
	}
	if names, _ := Names(fs, InboxDir); len(names) != 1 || names[0] != real {
		t.Errorf("Names lists %v while the message has a stray temporary name", names)
	}
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Errorf("the stray temporary name is still there: %v", err)
	}
}
