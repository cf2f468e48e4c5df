package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/snapshot"
)

// snapshotCounts is how many hourly sessions the old snapshot repository has seen, and how
// long it keeps them: a year with 60 days kept (-cryo.full), or, by default, 2,000 hours with
// 30 days kept. What the figure tests is that a snapshot's cost depends on the retention, not
// on the age: the retention must be passed several times over (six at full size), so that
// compaction has run and dropped snapshots, as in year five. Five years with a year kept
// (44,000 snapshots) took over 15 minutes of a 20-minute `make bench` and tested nothing more.
func snapshotCounts() (sessions int, keep time.Duration) {
	if *full {
		return 8_760, 60 * 24 * time.Hour
	}
	return 2_000, 30 * 24 * time.Hour
}

// snapChamber writes a workspace of 200 files of 4 KiB in 10 directories.
func snapChamber(tb testing.TB, dir string) {
	tb.Helper()
	for d := 0; d < 10; d++ {
		for f := 0; f < 20; f++ {
			p := filepath.Join(dir, fmt.Sprintf("src%d", d), fmt.Sprintf("f%02d.txt", f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("line %d %d\n", d, f), 400)), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// snapSession is what one session does: it rewrites one file and appends to NOTES.md, then
// the snapshot after it is taken. It returns the snapshot's time.
func snapSession(tb testing.TB, repo *snapshot.Repo, dir string, n int, now time.Time, keep time.Duration) time.Duration {
	tb.Helper()
	p := filepath.Join(dir, fmt.Sprintf("src%d", n%10), fmt.Sprintf("f%02d.txt", n%20))
	if err := os.WriteFile(p, []byte(fmt.Sprintf("session %d\n", n)+strings.Repeat("x", 4000)), 0o644); err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "NOTES.md"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(f, "session %d: did a thing\n", n)
	f.Close()
	fs, err := confined.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer fs.Close()
	opt := snapshot.Options{Own: []string{"cryo.log", ".cryo", "messages"}, MaxFile: 10 << 20, Keep: keep}
	t0 := time.Now()
	if _, err := repo.Take(context.Background(), fs, opt, snapshot.Request{Kind: snapshot.KindSession, Session: n, Now: now}); err != nil {
		tb.Fatal(err)
	}
	return time.Since(t0)
}

// BenchmarkSnapshots compares the snapshot after a session in a repository that has seen
// thousands of hourly sessions (compacted to its retention) with one that has seen one: the
// cost of a snapshot must depend on the chamber and the retention, never on the chamber's age.
func BenchmarkSnapshots(b *testing.B) {
	git, err := exec.LookPath("git")
	if err != nil {
		b.Skip("git is not installed")
	}
	sessions, keep := snapshotCounts()
	root := b.TempDir()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := func(name string) (*snapshot.Repo, string) {
		dir := filepath.Join(root, name, "chamber")
		snapChamber(b, dir)
		repo, err := snapshot.Open(filepath.Join(root, name, "snapshots"), git)
		if err != nil {
			b.Fatal(err)
		}
		return repo, dir
	}
	oldRepo, oldDir := open("old")
	t0 := time.Now()
	for n := 1; n <= sessions; n++ {
		snapSession(b, oldRepo, oldDir, n, start.Add(time.Duration(n)*time.Hour), keep)
	}
	b.Logf("took %d hourly snapshots in %s", sessions, time.Since(t0).Round(time.Millisecond))
	freshRepo, freshDir := open("fresh")
	snapSession(b, freshRepo, freshDir, 1, start.Add(time.Duration(sessions)*time.Hour), keep)

	var old, fresh []time.Duration
	// Rounds are cheap (tens of milliseconds) next to building the old repository: always 21,
	// so that the median means something on a loaded machine.
	n := max(reps(b, 21), 21)
	for round := 0; round < n; round++ {
		at := start.Add(time.Duration(sessions+round+1)*time.Hour + 30*time.Minute)
		old = append(old, snapSession(b, oldRepo, oldDir, sessions+round+1, at, keep))
		fresh = append(fresh, snapSession(b, freshRepo, freshDir, round+2, at, keep))
	}
	entries, _ := oldRepo.Entries()
	mo, mf := median(old), median(fresh)
	ratio := float64(mo) / float64(mf)
	what := fmt.Sprintf("%d hourly sessions, snapshot_keep %s (%d snapshots kept, repository %s); 200 files, one rewritten per session; against a repository of one snapshot",
		sessions, keep, len(entries), mib(dirSize(b, oldRepo.Dir())))
	record(groupYears, "a snapshot after a session, after thousands of sessions / after 1 (in process)", what,
		fmt.Sprintf("%.2fx: median %s against %s (n=%d)", ratio, ms(mo), ms(mf), n), "≤ 1.5x", ok(ratio <= 1.5))
	b.ReportMetric(ratio, "snapshot-ratio")
}

func dirSize(tb testing.TB, dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
