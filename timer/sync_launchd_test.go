package timer

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// The sync agent through the stand-in launchctl: loaded at arming (RunAtLoad runs the first
// sync), left alone when nothing changed, reloaded when the interval changes, unloaded and
// removed by DisarmPoll; the one-shot agents are untouched.
func TestLaunchdArmPoll(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	label := LaunchdSyncLabel(e.c.ID)
	argv := []string{e.bin, "sync", "--dir", e.c.Dir}
	var p Poller = e.b

	if ok, err := p.PollArmed(ctx, e.c.ID); ok || err != nil {
		t.Fatalf("PollArmed before ArmPoll = %v, %v", ok, err)
	}
	e.fake.ResetCalls()
	if err := p.ArmPoll(ctx, e.c, 5*time.Minute, argv); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(label), "bootstrap gui/501")
	j, ok := e.fake.Job(e.target(label))
	if !ok || !j.RunAtLoad || j.Runs != 1 || strings.Join(j.Arguments, " ") != strings.Join(argv, " ") {
		t.Fatalf("sync job = %+v, %v", j, ok)
	}
	data, err := os.ReadFile(e.plistPath(label))
	if err != nil || !strings.Contains(string(data), "<key>StartInterval</key>") || !strings.Contains(string(data), "<integer>300</integer>") {
		t.Fatalf("plist: %v\n%s", err, data)
	}

	// The same again: nothing to do.
	if err := p.ArmPoll(ctx, e.c, 5*time.Minute, argv); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(label))

	// Another interval: unloaded and loaded from the new file.
	if err := p.ArmPoll(ctx, e.c, time.Minute, argv); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(label), "bootout "+e.target(label), "bootstrap gui/501")
	if data, _ := os.ReadFile(e.plistPath(label)); !strings.Contains(string(data), "<integer>60</integer>") {
		t.Errorf("plist after re-arm:\n%s", data)
	}
	if ok, err := p.PollArmed(ctx, e.c.ID); !ok || err != nil {
		t.Errorf("PollArmed = %v, %v", ok, err)
	}

	// A wake timer beside it is not disturbed by DisarmPoll.
	if err := e.b.Arm(ctx, e.c, e.job(Wake, time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCalls()
	if err := p.DisarmPoll(ctx, e.c.ID); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "bootout "+e.target(label))
	if fileExists(e.plistPath(label)) {
		t.Error("DisarmPoll left the plist")
	}
	if ok, err := p.PollArmed(ctx, e.c.ID); ok || err != nil {
		t.Errorf("PollArmed after DisarmPoll = %v, %v", ok, err)
	}
	if _, ok := e.fake.Job(e.target(LaunchdLabel(e.c.ID, Wake))); !ok {
		t.Error("DisarmPoll unloaded the wake agent")
	}
	if err := p.DisarmPoll(ctx, e.c.ID); err != nil {
		t.Errorf("second DisarmPoll: %v", err)
	}
	// ps does not mistake the sync agent for a timer kind.
	if err := p.ArmPoll(ctx, e.c, time.Minute, argv); err != nil {
		t.Fatal(err)
	}
	in, err := e.b.Installed(ctx)
	if err != nil || len(in) != 1 || len(in[0].Kinds) != 1 || in[0].Kinds[0] != Wake {
		t.Errorf("Installed = %+v, %v", in, err)
	}
}
