package message

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// latestFixture is an outbox of 30 messages with every kind of name that is not one among
// them: a hard link to a file outside (the newest name of all), a symlink, a FIFO, a directory
// and a hidden file with message names, and a stray temporary twin of the newest message.
func latestFixture(t *testing.T) (fs *confined.Dir, ch string, names []string) {
	t.Helper()
	base := t.TempDir()
	ch = filepath.Join(base, "chamber")
	box := filepath.Join(ch, OutboxDir)
	if err := os.MkdirAll(box, 0o700); err != nil {
		t.Fatal(err)
	}
	fs, err := confined.Open(ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	for i := 0; i < 30; i++ {
		n, err := Write(fs, OutboxDir, &Message{From: "agent", Kind: KindReply, Time: time.Date(2026, 1, 1, i, 0, 0, 0, time.UTC), Body: "reply\n"})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	outside := filepath.Join(base, "secret")
	if err := os.WriteFile(outside, []byte("PRIVATE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Link(outside, filepath.Join(box, "20270101T000000.000000000Z-x-00000000.md")),
		os.Symlink(outside, filepath.Join(box, "20261231T000000.000000000Z-x-00000001.md")),
		syscall.Mkfifo(filepath.Join(box, "20261231T000000.000000000Z-x-00000002.md"), 0o600),
		os.Mkdir(filepath.Join(box, "20261231T000000.000000000Z-x-00000003.md"), 0o700),
		os.WriteFile(filepath.Join(box, ".20261231T000000.000000000Z-x-00000004.md"), nil, 0o600),
		os.Link(filepath.Join(box, names[29]), filepath.Join(box, "."+names[29]+".tmp-000000000000")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return fs, ch, names
}

// LatestNames(n) is Names's last n, whatever the listing holds.
func TestLatestNamesIsTheEndOfNames(t *testing.T) {
	fs, _, want := latestFixture(t)
	for n := 1; n <= 32; n++ {
		got, err := LatestNames(fs, OutboxDir, n)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[max(0, len(want)-n):]; !slices.Equal(got, w) {
			t.Fatalf("LatestNames(%d) = %v, want %v", n, got, w)
		}
	}
	all, err := Names(fs, OutboxDir)
	if err != nil || !slices.Equal(all, want) {
		t.Fatalf("Names = %v, %v; want %v", all, err, want)
	}
	if got, err := LatestNames(fs, "messages/nowhere", 5); err != nil || got != nil {
		t.Errorf("LatestNames of a missing directory = %v, %v; want nothing", got, err)
	}
}

// LatestNames looks at no file older than the ones it takes: an old message's stray temporary
// twin, which Names settles (it stats every file), is still there after LatestNames(5), and the
// newest message's twin, which it reached, is settled.
func TestLatestNamesStatsOnlyWhatItTakes(t *testing.T) {
	fs, ch, names := latestFixture(t)
	box := filepath.Join(ch, OutboxDir)
	oldTwin := filepath.Join(box, "."+names[0]+".tmp-000000000000")
	if err := os.Link(filepath.Join(box, names[0]), oldTwin); err != nil {
		t.Fatal(err)
	}
	got, err := LatestNames(fs, OutboxDir, 5)
	if err != nil || !slices.Equal(got, names[25:]) {
		t.Fatalf("LatestNames(5) = %v, %v; want %v", got, err, names[25:])
	}
	if _, err := os.Lstat(oldTwin); err != nil {
		t.Errorf("LatestNames(5) looked at the oldest message (its twin was settled): %v", err)
	}
	if _, err := os.Lstat(filepath.Join(box, "."+names[29]+".tmp-000000000000")); !os.IsNotExist(err) {
		t.Errorf("the newest message's twin is still there: %v", err)
	}
	if _, err := Names(fs, OutboxDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(oldTwin); !os.IsNotExist(err) {
		t.Errorf("Names left the oldest message's twin: the test shows nothing (%v)", err)
	}
}
