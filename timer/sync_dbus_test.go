package timer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// The sync timer against a real user manager: the first sync runs at arming, the next ones
// every interval, also after a sync that failed (a server down must mean a retry at the next
// poll); DisarmPoll stops it and removes both units.
func TestSystemdPollRepeatsAfterFailure(t *testing.T) {
	f := newFixture(t)
	c, _ := f.chamber(t, "poll")
	ctx := ctxT(t)
	runs := filepath.Join(c.Dir, "runs")
	// Every run appends a line and fails.
	argv := []string{"/bin/sh", "-c", `echo run >> "$0"; exit 1`, runs}
	p, ok := f.b.(timer.Poller)
	if !ok {
		t.Fatal("the systemd backend is not a Poller")
	}
	if armed, err := p.PollArmed(ctx, c.ID); armed || err != nil {
		t.Fatalf("PollArmed before ArmPoll = %v, %v", armed, err)
	}
	if err := p.ArmPoll(ctx, c, 2*time.Second, argv); err != nil {
		t.Fatal(err)
	}
	if armed, err := p.PollArmed(ctx, c.ID); !armed || err != nil {
		t.Fatalf("PollArmed = %v, %v", armed, err)
	}
	count := func() int {
		data, _ := os.ReadFile(runs)
		return strings.Count(string(data), "run\n")
	}
	f.m.WaitFor(t, 20*time.Second, "3 syncs (each failing)", func() bool { return count() >= 3 })
	for _, u := range []string{timer.SystemdSyncTimerName(c.ID), timer.SystemdSyncServiceName(c.ID)} {
		if _, err := os.Stat(filepath.Join(f.m.UnitDir, u)); err != nil {
			t.Errorf("unit %s: %v", u, err)
		}
	}

	if err := p.DisarmPoll(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if armed, err := p.PollArmed(ctx, c.ID); armed || err != nil {
		t.Errorf("PollArmed after DisarmPoll = %v, %v", armed, err)
	}
	for _, u := range []string{timer.SystemdSyncTimerName(c.ID), timer.SystemdSyncServiceName(c.ID)} {
		if _, err := os.Stat(filepath.Join(f.m.UnitDir, u)); !os.IsNotExist(err) {
			t.Errorf("unit %s still there: %v", u, err)
		}
	}
	n := count()
	time.Sleep(5 * time.Second) // more than two intervals
	if got := count(); got != n {
		t.Errorf("%d syncs ran after DisarmPoll", got-n)
	}
	if err := p.DisarmPoll(ctx, c.ID); err != nil {
		t.Errorf("second DisarmPoll: %v", err)
	}
}
