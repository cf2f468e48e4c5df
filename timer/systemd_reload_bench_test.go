package timer_test

// The systemd backend skips what would change nothing (an unchanged unit file, EnableUnitFiles
// when the links exist, and the reload and restart when the manager already runs the unit as
// it is on disk), because a reload costs tens of milliseconds on every wake
// (docs/BENCHMARKS.md, measured by internal/bench). These tests hold the skip to "never wrong".

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/cryochamber/cryochamber/timer"
)

// writeBehind writes the wake timer for at into the unit directory without telling the
// manager: what a process that died between writing the unit and reloading leaves behind.
func writeBehind(t *testing.T, f *fixture, c timer.Chamber, j timer.Job) {
	t.Helper()
	_, tmr, err := timer.SystemdUnits(c, j)
	if err != nil {
		t.Fatal(err)
	}
	data := unitBytes(t, tmr)
	if err := os.WriteFile(filepath.Join(f.m.UnitDir, timer.SystemdTimerName(c.ID, j.Kind)), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func unitBytes(t *testing.T, opts []*unit.UnitOption) []byte {
	t.Helper()
	data, err := io.ReadAll(unit.Serialize(opts))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A unit file already on disk but not yet loaded (its writer died before the reload) is not
// "unchanged": Arm with that content must still reload, or the manager keeps the old time.
func TestSystemdArmReloadsAFileWrittenWithoutReload(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "behind")
	argv := f.argv(c, "wake")
	first := soon(time.Hour)
	if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: first, Argv: argv}); err != nil {
		t.Fatal(err)
	}
	second := soon(2 * time.Hour)
	j := timer.Job{Kind: timer.Wake, At: second, Argv: argv}
	writeBehind(t, f, c, j)
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(first) {
		t.Fatalf("before the re-Arm the manager must still have the first time: Next = %v, %v, %v; want %v", next, ok, err, first)
	}
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(second) {
		t.Fatalf("Next after Arm over an unloaded file = %v, %v, %v; want %v (the reload was skipped)", next, ok, err, second)
	}
}

// A stopped timer whose file is unchanged is started again, not skipped.
func TestSystemdArmStartsAStoppedUnchangedTimer(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "stopped")
	j := timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "wake")}
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	f.m.Systemctl(t, "stop", timer.SystemdTimerName(c.ID, timer.Wake))
	if _, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || ok {
		t.Fatalf("a stopped timer reports a next elapse (ok %v, err %v): the test cannot tell", ok, err)
	}
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(j.At) {
		t.Fatalf("Next after Arm of the stopped timer = %v, %v, %v; want %v", next, ok, err, j.At)
	}
}

// An unchanged, running unit is left alone: its files are not rewritten (same inode and mtime),
// and it still reports the same next elapse.
func TestSystemdArmLeavesAnUnchangedTimerAlone(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "unchanged")
	j := timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "wake")}
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	names := []string{timer.SystemdTimerName(c.ID, timer.Wake), timer.SystemdServiceName(c.ID, timer.Wake)}
	before := map[string]os.FileInfo{}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(f.m.UnitDir, n))
		if err != nil {
			t.Fatal(err)
		}
		before[n] = fi
	}
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(f.m.UnitDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(fi, before[n]) || !fi.ModTime().Equal(before[n].ModTime()) {
			t.Errorf("%s was rewritten by an Arm that changed nothing", n)
		}
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(j.At) {
		t.Fatalf("Next after the unchanged Arm = %v, %v, %v; want %v", next, ok, err, j.At)
	}
	// A different time is a change again.
	j.At = j.At.Add(time.Minute)
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(j.At) {
		t.Fatalf("Next after re-Arm one minute later = %v, %v, %v; want %v", next, ok, err, j.At)
	}
}
