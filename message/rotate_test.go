package message

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

func TestRotate(t *testing.T) {
	root := t.TempDir()
	fs, err := confined.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	write := func(dir, name, body string) {
		t.Helper()
		if err := fs.MkdirAll(dir, DirMode); err != nil {
			t.Fatal(err)
		}
		if err := fs.CreateNew(filepath.Join(dir, name), []byte(body), FileMode); err != nil {
			t.Fatal(err)
		}
	}
	old := []string{
		"20260830T235959.999999999Z-session1-reply0.md",
		"20260901T000000.000000000Z-alice-0000aaaa.md",
		"20260915T120000.000000000Z-session9-notice.md",
		"20261005T080000.000000000Z-email-abcdef.md",
	}
	recent := []string{
		"20261101T000000.000000000Z-session99-reply0.md", // the cutoff itself stays
		"20261120T100000.000000000Z-bob-0000bbbb.md",
	}
	for _, n := range append(append([]string{}, old...), recent...) {
		write(OutboxDir, n, "x\n")
	}
	write(OutboxDir, "hello.md", "dropped in by hand: no time in its name\n")
	// A crash after the link of an earlier Rotate: the same file under both names.
	write(OutboxDir, "20260802T000000.000000000Z-session0-reply0.md", "y\n")
	if err := fs.MkdirAll(OutboxDir+"/2026-08", DirMode); err != nil {
		t.Fatal(err)
	}
	if err := fs.Link(OutboxDir+"/20260802T000000.000000000Z-session0-reply0.md", OutboxDir+"/2026-08/20260802T000000.000000000Z-session0-reply0.md"); err != nil {
		t.Fatal(err)
	}
	// Another file already under a name: left where it is, nothing overwritten.
	write(OutboxDir, "20260803T000000.000000000Z-session0-reply1.md", "mine\n")
	write(OutboxDir+"/2026-08", "20260803T000000.000000000Z-session0-reply1.md", "theirs\n")
	// A month that is a symlink (to the inbox): its messages stay.
	write(OutboxDir, "20260701T000000.000000000Z-session0-reply2.md", "z\n")
	if err := os.Symlink("../inbox", filepath.Join(root, OutboxDir, "2026-07")); err != nil {
		t.Fatal(err)
	}

	cutoff := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	n, err := Rotate(fs, OutboxDir, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(old)+1 {
		t.Errorf("Rotate moved %d, want %d", n, len(old)+1)
	}
	if n, err := Count(fs, OutboxDir); err != nil || n != 5 {
		t.Errorf("Count of the live outbox = %d, %v; want 5 (4 messages and hello.md)", n, err)
	}
	live, _ := Names(fs, OutboxDir)
	want := append([]string{"20260701T000000.000000000Z-session0-reply2.md", "20260803T000000.000000000Z-session0-reply1.md"}, recent...)
	want = append(want, "hello.md")
	if !slices.Equal(live, want) {
		t.Errorf("live outbox after Rotate = %q, want %q", live, want)
	}
	months, err := Months(fs, OutboxDir)
	if err != nil || !slices.Equal(months, []string{"2026-08", "2026-09", "2026-10"}) {
		t.Errorf("Months = %q, %v", months, err)
	}
	for _, c := range []struct{ month, name string }{{"2026-08", old[0]}, {"2026-09", old[1]}, {"2026-09", old[2]}, {"2026-10", old[3]}} {
		if m, err := Read(fs, OutboxDir+"/"+c.month, c.name); err != nil || m.Body != "x\n" {
			t.Errorf("%s/%s: %v", c.month, c.name, err)
		}
	}
	if m, _ := Read(fs, OutboxDir+"/2026-08", "20260803T000000.000000000Z-session0-reply1.md"); m == nil || m.Body != "theirs\n" {
		t.Errorf("Rotate overwrote a message in the month directory: %+v", m)
	}
	if fi, err := os.Stat(filepath.Join(root, OutboxDir, "2026-09")); err != nil || fi.Mode().Perm() != DirMode {
		t.Errorf("month directory: %v, %v; want mode %o", fi, err, DirMode)
	}
	// Again: nothing left to move.
	if n, err := Rotate(fs, OutboxDir, cutoff); err != nil || n != 0 {
		t.Errorf("second Rotate = %d, %v", n, err)
	}
	if _, err := Rotate(fs, "messages/none", cutoff); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Rotate of a missing directory: %v", err)
	}
}
