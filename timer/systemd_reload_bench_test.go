package timer_test

// The systemd backend skips what would change nothing (an unchanged unit file, EnableUnitFiles
// when the links exist, and the reload and restart when the manager already runs the unit as
// it is on disk), because a reload costs tens of milliseconds on every wake
// (docs/BENCHMARKS.md, measured by internal/bench). These tests hold the skip to "never wrong".

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/cryochamber/cryochamber/timer"
)

// writeBehind writes the service of j into the unit directory without telling the manager: what
// a process that died between writing a changed unit and reloading leaves behind.
func writeBehind(t *testing.T, f *fixture, c timer.Chamber, j timer.Job) {
	t.Helper()
	svc, _, err := timer.SystemdUnits(c, j)
	if err != nil {
		t.Fatal(err)
	}
	data := unitBytes(t, svc)
	if err := os.WriteFile(filepath.Join(f.m.UnitDir, timer.SystemdServiceName(c.ID, j.Kind)), data, 0o644); err != nil {
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

// reloads is the manager's UnitsLoadTimestampMonotonic: set at the end of every daemon-reload
// (0 until the first), so a test can tell whether one happened without timing anything. The
// last step of TestSystemdRearmWithoutReload shows that it does change.
func reloads(t *testing.T, f *fixture) string {
	t.Helper()
	out := strings.TrimSpace(f.m.Systemctl(t, "show", "--property=UnitsLoadTimestampMonotonic", "--value"))
	if out == "" {
		t.Fatal("the manager reports no UnitsLoadTimestampMonotonic: the test cannot tell")
	}
	return out
}

// A service file already on disk but not loaded in its new version (its writer died before
// the reload) is not "unchanged": Arm with that content must still reload, or the timer would
// start the old command.
func TestSystemdArmReloadsAFileWrittenWithoutReload(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, rec := f.chamber(t, "behind")
	first := timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "first")}
	if err := f.b.Arm(ctx, c, first); err != nil {
		t.Fatal(err)
	}
	j := timer.Job{Kind: timer.Wake, At: soon(3 * time.Second), Argv: f.argv(c, "second")}
	writeBehind(t, f, c, j)
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	runs := f.waitRuns(t, rec, 1, 30*time.Second)
	checkRun(t, runs[0], j.Argv, c.EnvFile)
}

// A stopped timer is started again by Arm.
func TestSystemdArmStartsAStoppedTimer(t *testing.T) {
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

// Re-arming at a new time, as every wake does, writes no file and reloads nothing: the service
// files are not rewritten (same inode and mtime) and the manager did not reload; the timer
// holds the new time.
func TestSystemdRearmWithoutReload(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "unchanged")
	wake := timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "wake")}
	fb := timer.Job{Kind: timer.Fallback, At: soon(2 * time.Hour), Argv: f.argv(c, "fallback")}
	if err := f.b.Arm(ctx, c, wake, fb); err != nil {
		t.Fatal(err)
	}
	names := []string{timer.SystemdServiceName(c.ID, timer.Wake), timer.SystemdServiceName(c.ID, timer.Fallback), timer.SystemdBootName(c.ID)}
	before := map[string]os.FileInfo{}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(f.m.UnitDir, n))
		if err != nil {
			t.Fatal(err)
		}
		before[n] = fi
	}
	loaded := reloads(t, f)
	for i := 1; i <= 3; i++ {
		wake.At = wake.At.Add(time.Minute)
		fb.At = fb.At.Add(time.Minute)
		if err := f.b.Arm(ctx, c, wake, fb); err != nil {
			t.Fatal(err)
		}
		for _, j := range []timer.Job{wake, fb} {
			if next, ok, err := f.b.Next(ctx, c.ID, j.Kind); err != nil || !ok || !next.Equal(j.At) {
				t.Fatalf("re-arm %d: Next(%s) = %v, %v, %v; want %v", i, j.Kind, next, ok, err, j.At)
			}
		}
	}
	if now := reloads(t, f); now != loaded {
		t.Errorf("re-arming reloaded the manager (units loaded at %s, then at %s)", loaded, now)
	}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(f.m.UnitDir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(fi, before[n]) || !fi.ModTime().Equal(before[n].ModTime()) {
			t.Errorf("%s was rewritten by an Arm that changed only the time", n)
		}
	}
	// A new binary is a change of the services: written, and the manager reloads once.
	wake.Argv = f.argv(c, "wake-v2")
	if err := f.b.Arm(ctx, c, wake, fb); err != nil {
		t.Fatal(err)
	}
	if now := reloads(t, f); now == loaded {
		t.Error("a changed, loaded service was not reloaded")
	}
}

// Timer unit files an earlier cryochamber wrote (one per timer, enabled) give way to the
// transient timers at the next Arm, and the chamber is armed as usual.
func TestSystemdArmMigratesTimerFiles(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "old")
	j := timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "wake")}
	svc, tmr, err := timer.SystemdUnits(c, j)
	if err != nil {
		t.Fatal(err)
	}
	name := timer.SystemdTimerName(c.ID, timer.Wake)
	old := append(tmr, unit.NewUnitOption("Timer", "Persistent", "true"), unit.NewUnitOption("Install", "WantedBy", "timers.target"))
	for n, opts := range map[string][]*unit.UnitOption{timer.SystemdServiceName(c.ID, timer.Wake): svc, name: old} {
		if err := os.WriteFile(filepath.Join(f.m.UnitDir, n), unitBytes(t, opts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.m.Systemctl(t, "enable", "--now", name)
	if _, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok {
		t.Fatalf("the old timer file is not armed (ok %v, err %v): the test cannot tell", ok, err)
	}
	j.At = j.At.Add(time.Minute)
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(j.At) {
		t.Fatalf("Next after the migrating Arm = %v, %v, %v; want %v", next, ok, err, j.At)
	}
	for _, n := range []string{name, filepath.Join("timers.target.wants", name)} {
		if _, err := os.Lstat(filepath.Join(f.m.UnitDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there (%v)", n, err)
		}
	}
}
