package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// firing is one timer that records when its service ran.
type firing struct {
	c      timer.Chamber
	at     time.Time // OnCalendar time
	record string    // the file the fired process writes its clock to
}

// BenchmarkTimerAccuracy arms real timers in a private user manager and records, in the
// process each one starts, when it ran: the lateness is that time minus the OnCalendar time.
// The timers armed by the backend (AccuracySec=1s) fire one second apart; beside them, the same
// units without AccuracySec= (systemd's default of one minute) show why the backend sets it,
// and with AccuracySec=1ms how much of the lateness is the accuracy window itself.
func BenchmarkTimerAccuracy(b *testing.B) {
	m := systemdtest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	be, err := timer.NewSystemd(ctx, m.Options())
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	precise, loose := 2, 0
	if *full {
		precise, loose = 24, 3
	}
	var mLoose, mMs *systemdtest.Manager
	if loose > 0 {
		mLoose, mMs = systemdtest.Start(b), systemdtest.Start(b)
	}
	root := b.TempDir()
	// Time to arm them all before the first fires (a reload each, slower on a loaded machine).
	lead := 2*time.Second + time.Duration(precise+2*loose)*250*time.Millisecond
	start := time.Now().UTC().Add(lead).Truncate(time.Second)
	newFiring := func(name string, at time.Time) firing {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Join(dir, ".cryo"), 0o700); err != nil {
			b.Fatal(err)
		}
		c := timer.Chamber{ID: timer.ID(dir), Dir: dir, EnvFile: filepath.Join(dir, ".cryo", "env")}
		if err := os.WriteFile(c.EnvFile, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		return firing{c: c, at: at, record: filepath.Join(dir, "fired")}
	}
	job := func(f firing) timer.Job {
		// date(1) writes the wall clock (ns) at once: the record is the fired process's own.
		return timer.Job{Kind: timer.Wake, At: f.at, Argv: []string{"/bin/sh", "-c", "exec date +%s.%N > " + shQuote(f.record)}}
	}
	var fs, ls []firing
	for i := 0; i < precise; i++ {
		f := newFiring(fmt.Sprintf("precise-%02d", i), start.Add(time.Duration(i)*time.Second))
		if err := be.Arm(ctx, f.c, job(f)); err != nil {
			b.Fatal(err)
		}
		if got, ok, err := be.Next(ctx, f.c.ID, timer.Wake); err != nil || !ok || !got.Equal(f.at) {
			b.Fatalf("Next = %v, %v, %v; want %v", got, ok, err, f.at)
		}
		fs = append(fs, f)
	}
	// The contrasts: the backend's units installed by hand, without AccuracySec= (systemd's
	// default of a minute) and with AccuracySec=1ms (how much of the lateness is the window).
	// Each set runs in a manager of its own: a manager's event loop, woken for one timer,
	// also runs every other timer already due, and would hide the default's minute.
	handmade := func(m *systemdtest.Manager, name string, at time.Time, accuracy string) firing {
		f := newFiring(name, at)
		svc, tmr, err := timer.SystemdUnits(f.c, job(f))
		if err != nil {
			b.Fatal(err)
		}
		var kept []*unit.UnitOption
		for _, o := range tmr {
			switch {
			case o.Name != "AccuracySec":
				kept = append(kept, o)
			case accuracy != "":
				kept = append(kept, unit.NewUnitOption("Timer", "AccuracySec", accuracy))
			}
		}
		writeUnitFile(b, m.UnitDir, timer.SystemdServiceName(f.c.ID, timer.Wake), svc)
		writeUnitFile(b, m.UnitDir, timer.SystemdTimerName(f.c.ID, timer.Wake), kept)
		return f
	}
	startAll := func(m *systemdtest.Manager, group []firing) {
		args := []string{"start"}
		for _, f := range group {
			args = append(args, timer.SystemdTimerName(f.c.ID, timer.Wake))
		}
		m.Systemctl(b, "daemon-reload")
		m.Systemctl(b, args...)
	}
	var ms1 []firing
	if loose > 0 {
		for i := 0; i < loose; i++ {
			ls = append(ls, handmade(mLoose, fmt.Sprintf("loose-%02d", i), start.Add(time.Duration(2+10*i)*time.Second), ""))
			ms1 = append(ms1, handmade(mMs, fmt.Sprintf("ms-%02d", i), start.Add(time.Duration(2+5*i)*time.Second), "1ms"))
		}
		startAll(mLoose, ls)
		startAll(mMs, ms1)
	}
	if time.Now().After(start) {
		b.Fatalf("arming took until %v, past the first timer (%v): the lateness would be the arming's", time.Now(), start)
	}
	last := start.Add(time.Duration(precise) * time.Second)
	if loose > 0 {
		last = ls[len(ls)-1].at.Add(time.Minute) // AccuracySec=1min: up to a minute late
	}
	deadline := last.Add(15 * time.Second)
	for {
		done := true
		for _, f := range append(append(append([]firing{}, fs...), ls...), ms1...) {
			if _, err := os.Stat(f.record); err != nil {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	late := func(group []firing) ([]time.Duration, int) {
		var d []time.Duration
		missed := 0
		for _, f := range group {
			t, err := readFired(f.record)
			if err != nil {
				missed++
				b.Logf("%s: %v", f.c.ID, err)
				continue
			}
			d = append(d, t.Sub(f.at))
		}
		return d, missed
	}
	pd, pmissed := late(fs)
	if len(pd) > 0 {
		worst := quantile(pd, 1)
		record(groupTimer, "timer lateness: fired process's clock − OnCalendar (backend's units, AccuracySec=1s)",
			fmt.Sprintf("%d firings, one a second", precise),
			fmt.Sprintf("median %s, p90 %s, worst %s, early %d, missed %d", ms(median(pd)), ms(quantile(pd, 0.9)), ms(worst), early(pd), pmissed),
			"worst < 1.5 s, none missed or early", ok(worst < 1500*time.Millisecond && pmissed == 0 && early(pd) == 0))
	} else {
		record(groupTimer, "timer lateness (backend's units, AccuracySec=1s)", fmt.Sprintf("%d firings", precise), "none fired", "worst < 1.5 s", ok(false))
	}
	if loose > 0 {
		ld, lmissed := late(ls)
		value := "none fired"
		if len(ld) > 0 {
			value = fmt.Sprintf("median %s, worst %s, missed %d", secs(median(ld)), secs(quantile(ld, 1)), lmissed)
		}
		record(groupTimer, "contrast: the same units without AccuracySec= (systemd's default, 1 min)", fmt.Sprintf("%d firings, 10 s apart", loose), value, "", nil)
		md, mmissed := late(ms1)
		value = "none fired"
		if len(md) > 0 {
			value = fmt.Sprintf("median %s, worst %s, missed %d", ms(median(md)), ms(quantile(md, 1)), mmissed)
		}
		record(groupTimer, "contrast: the same units with AccuracySec=1ms", fmt.Sprintf("%d firings", loose), value, "", nil)
	}
}

// early counts negative latenesses: a timer must never fire before its time.
func early(d []time.Duration) int {
	n := 0
	for _, x := range d {
		if x < 0 {
			n++
		}
	}
	return n
}

// readFired reads the "seconds.nanoseconds" a fired process wrote.
func readFired(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("did not fire: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return time.Time{}, err
	}
	sec, nsec, ok := strings.Cut(strings.TrimSpace(string(data)), ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns, err2 := strconv.ParseInt(nsec, 10, 64)
	if !ok || err1 != nil || err2 != nil || len(nsec) != 9 {
		return time.Time{}, fmt.Errorf("record %q is not seconds.nanoseconds", data)
	}
	return time.Unix(s, ns), nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
