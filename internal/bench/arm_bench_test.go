package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/coreos/go-systemd/v22/unit"
	"github.com/godbus/dbus/v5"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// BenchmarkArmDesigns measures, in this process against a private user manager, what arming a
// wake's two timers (at new times) and reading them back costs with the backend as it is
// (transient timers over D-Bus), and with two designs as prototypes that check the manager
// reports the wanted times:
//
//   - the previous design: one unit file per timer, rewritten at every arm, then one
//     daemon-reload for both timers and a restart of each;
//   - a fresh unit name per arm, no reload at all: a unit the manager has never loaded is read
//     from disk when it is started, so only the old timers are stopped and removed.
func BenchmarkArmDesigns(b *testing.B) {
	m := systemdtest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	be, err := timer.NewSystemd(ctx, m.Options())
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	conn, err := dialManager(ctx, m)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()

	root := b.TempDir()
	mk := func(name string) timer.Chamber {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(dir, ".cryo"), 0o700); err != nil {
			b.Fatal(err)
		}
		c := timer.Chamber{ID: timer.ID(dir), Dir: dir, EnvFile: filepath.Join(dir, ".cryo", "env")}
		if err := os.WriteFile(c.EnvFile, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		return c
	}
	today, batch, fresh := mk("today"), mk("batch"), mk("fresh")
	base := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	var dToday, dBatch, dFresh []time.Duration
	var prev []string // the fresh design's current timer names
	var loads []float64
	n := reps(b, 15)
	for i := 0; i <= n; i++ { // round 0 installs everything and is not counted
		wake := base.Add(time.Duration(i) * time.Minute)
		jobs := []timer.Job{
			{Kind: timer.Wake, At: wake, Argv: []string{"/bin/true", "wake"}},
			{Kind: timer.Fallback, At: wake.Add(time.Hour), Argv: []string{"/bin/true", "fallback"}},
		}
		t0 := time.Now()
		if err := be.Arm(ctx, today, jobs...); err != nil {
			b.Fatal(err)
		}
		for _, j := range jobs {
			if got, ok, err := be.Next(ctx, today.ID, j.Kind); err != nil || !ok || !got.Equal(j.At) {
				b.Fatalf("today: Next(%s) = %v, %v, %v; want %v", j.Kind, got, ok, err, j.At)
			}
		}
		t1 := time.Now()
		armBatch(b, ctx, conn, m.UnitDir, batch, jobs)
		t2 := time.Now()
		prev = armFresh(b, ctx, conn, m.UnitDir, fresh, jobs, i, prev)
		t3 := time.Now()
		if i > 0 {
			loads = append(loads, load1())
			dToday, dBatch, dFresh = append(dToday, t1.Sub(t0)), append(dBatch, t2.Sub(t1)), append(dFresh, t3.Sub(t2))
		}
	}
	metric := "arm wake + fallback timers at new times, read both back (in process, D-Bus)"
	// The three designs took turns in every round (paired rounds, paired_bench_test.go).
	r := &rounds{walls: [][]time.Duration{slices.Clone(dToday), slices.Clone(dBatch)}, loads: loads}
	s := r.ratio(0, 1)
	recordPaired(groupArm, metric, "the backend / the previous design", fmt.Sprintf("%.2fx", s.med), s, "", nil)
	record(groupArm, metric, "the backend: transient timers", fmt.Sprintf("median %s (n=%d)", ms(median(dToday)), n), "", nil)
	record(groupArm, metric, "the previous design: timer unit files, one reload for both", fmt.Sprintf("median %s (n=%d)", ms(median(dBatch)), n), "", nil)
	record(groupArm, metric, "prototype: fresh unit names, no reload", fmt.Sprintf("median %s (n=%d)", ms(median(dFresh)), n), "", nil)
}

// dialManager connects to m's user manager the way the backend does (the session bus in the
// manager's runtime directory, else its private socket).
func dialManager(ctx context.Context, m *systemdtest.Manager) (*sd.Conn, error) {
	addr, hello := "unix:path="+filepath.Join(m.RuntimeDir, "bus"), true
	if _, err := os.Stat(filepath.Join(m.RuntimeDir, "bus")); err != nil {
		addr, hello = "unix:path="+filepath.Join(m.RuntimeDir, "systemd", "private"), false
	}
	return sd.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial(addr, dbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		if hello {
			if err := c.Hello(); err != nil {
				c.Close()
				return nil, err
			}
		}
		return c, nil
	})
}

// writeUnitFile writes one unit file as the backend does (atomically), unless it already holds
// that content.
func writeUnitFile(tb testing.TB, dir, name string, opts []*unit.UnitOption) {
	tb.Helper()
	data, err := io.ReadAll(unit.Serialize(opts))
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if old, err := os.ReadFile(p); err == nil && string(old) == string(data) {
		return
	}
	if err := atomicfile.Write(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// runJob starts a job and waits for its result.
func runJob(tb testing.TB, ctx context.Context, name string, start func(context.Context, string, string, chan<- string) (int, error)) {
	tb.Helper()
	ch := make(chan string, 1)
	if _, err := start(ctx, name, "replace", ch); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	if res := <-ch; res != "done" {
		tb.Fatalf("%s: job %s", name, res)
	}
}

// nextElapse reads a timer's NextElapseUSecRealtime.
func nextElapse(tb testing.TB, ctx context.Context, conn *sd.Conn, name string) time.Time {
	tb.Helper()
	p, err := conn.GetUnitTypePropertyContext(ctx, name, "Timer", "NextElapseUSecRealtime")
	if err != nil {
		tb.Fatalf("read %s: %v", name, err)
	}
	us, _ := p.Value.Value().(uint64)
	return time.UnixMicro(int64(us)).UTC()
}

// oldTimer is a timer unit as the previous design wrote it: the transient timer's options plus
// Persistent=true and an [Install] section, so that it survived a reboot on disk.
func oldTimer(tmr []*unit.UnitOption) []*unit.UnitOption {
	return append(append([]*unit.UnitOption{}, tmr...), unit.NewUnitOption("Timer", "Persistent", "true"),
		unit.NewUnitOption("Install", "WantedBy", "timers.target"))
}

// armBatch is the previous design: all four files, one reload, both timers restarted.
func armBatch(tb testing.TB, ctx context.Context, conn *sd.Conn, dir string, c timer.Chamber, jobs []timer.Job) {
	tb.Helper()
	var timers []string
	for _, j := range jobs {
		svc, tmr, err := timer.SystemdUnits(c, j)
		if err != nil {
			tb.Fatal(err)
		}
		writeUnitFile(tb, dir, timer.SystemdServiceName(c.ID, j.Kind), svc)
		writeUnitFile(tb, dir, timer.SystemdTimerName(c.ID, j.Kind), oldTimer(tmr))
		timers = append(timers, timer.SystemdTimerName(c.ID, j.Kind))
	}
	if _, err := os.Lstat(filepath.Join(dir, "timers.target.wants", timers[0])); err != nil {
		if _, _, err := conn.EnableUnitFilesContext(ctx, timers, false, true); err != nil {
			tb.Fatal(err)
		}
	}
	if err := conn.ReloadContext(ctx); err != nil {
		tb.Fatal(err)
	}
	for i, name := range timers {
		runJob(tb, ctx, name, conn.RestartUnitContext)
		if got := nextElapse(tb, ctx, conn, name); !got.Equal(jobs[i].At) {
			tb.Fatalf("batch: %s reports %v, want %v", name, got, jobs[i].At)
		}
	}
}

// armFresh is the no-reload design: the timers of arm number seq get names of their own; the
// previous ones (prev) are stopped, disabled and removed.
func armFresh(tb testing.TB, ctx context.Context, conn *sd.Conn, dir string, c timer.Chamber, jobs []timer.Job, seq int, prev []string) []string {
	tb.Helper()
	var timers []string
	for _, j := range jobs {
		svc, tmr, err := timer.SystemdUnits(c, j)
		if err != nil {
			tb.Fatal(err)
		}
		writeUnitFile(tb, dir, timer.SystemdServiceName(c.ID, j.Kind), svc)
		name := fmt.Sprintf("%s-%s-%d.timer", c.ID, j.Kind, seq)
		writeUnitFile(tb, dir, name, append(oldTimer(tmr), unit.NewUnitOption("Timer", "Unit", timer.SystemdServiceName(c.ID, j.Kind))))
		timers = append(timers, name)
	}
	if _, _, err := conn.EnableUnitFilesContext(ctx, timers, false, true); err != nil {
		tb.Fatal(err)
	}
	for i, name := range timers {
		runJob(tb, ctx, name, conn.StartUnitContext)
		if got := nextElapse(tb, ctx, conn, name); !got.Equal(jobs[i].At) {
			tb.Fatalf("fresh names: %s reports %v, want %v (the manager did not load the new unit without a reload)", name, got, jobs[i].At)
		}
	}
	if len(prev) > 0 {
		for _, name := range prev {
			runJob(tb, ctx, name, conn.StopUnitContext)
		}
		if _, err := conn.DisableUnitFilesContext(ctx, prev, false); err != nil {
			tb.Fatal(err)
		}
		for _, name := range prev {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return timers
}
