package timer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// sockets counts this process's open sockets.
func sockets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// One backend is one connection to the user manager (issue 28): go-systemd dials a second one
// for the job signals unless it is handed the first, and a wake paid for both handshakes. Jobs
// still complete over it (Arm waits for each).
func TestSystemdOneConnection(t *testing.T) {
	f := newFixture(t)
	before := sockets(t)
	b := connect(t, f.m.Options())
	if got := sockets(t) - before; got != 1 {
		t.Errorf("a backend opened %d sockets, want 1", got)
	}
	c, _ := f.chamber(t, "oneconn")
	at := soon(time.Hour)
	ctx := ctxT(t)
	for i := 0; i < 2; i++ { // the second Arm replaces loaded timers: stop jobs, then start jobs
		at = at.Add(time.Minute)
		if err := b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: at, Argv: f.argv(c, "w")},
			timer.Job{Kind: timer.Fallback, At: at.Add(time.Hour), Argv: f.argv(c, "f")}); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[timer.Kind]time.Time{timer.Wake: at, timer.Fallback: at.Add(time.Hour)} {
			if next, ok, err := b.Next(ctx, c.ID, k); err != nil || !ok || !next.Equal(want) {
				t.Fatalf("arm %d: Next(%s) = %v, %v, %v; want %v", i, k, next, ok, err, want)
			}
		}
	}
	if got := sockets(t) - before; got != 1 {
		t.Errorf("after arming, the backend holds %d sockets, want 1", got)
	}
}

// NextAll answers what Next answers, timer by timer: armed, never armed, disarmed, a kind the
// chamber has not, and a bad ID.
func TestSystemdNextAllAgreesWithNext(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	a, _ := f.chamber(t, "all-a")
	b, _ := f.chamber(t, "all-b")
	gone, _ := f.chamber(t, "all-gone")
	never, _ := f.chamber(t, "all-never")
	at := soon(2 * time.Hour)
	for i, c := range []timer.Chamber{a, b, gone} {
		w := at.Add(time.Duration(i) * time.Minute)
		if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: w, Argv: f.argv(c, "w")},
			timer.Job{Kind: timer.Fallback, At: w.Add(time.Hour), Argv: f.argv(c, "f")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.b.Disarm(ctx, gone.ID, timer.Wake); err != nil {
		t.Fatal(err)
	}
	var refs []timer.Ref
	for _, c := range []timer.Chamber{a, b, gone, never} {
		for _, k := range timer.Kinds {
			refs = append(refs, timer.Ref{ID: c.ID, Kind: k})
		}
	}
	refs = append(refs, timer.Ref{ID: a.ID, Kind: timer.Wake}, timer.Ref{ID: "not an id", Kind: timer.Wake})
	got := timer.NextAll(ctx, f.b, refs)
	if len(got) != len(refs) {
		t.Fatalf("NextAll gave %d answers for %d refs", len(got), len(refs))
	}
	armed := 0
	for i, r := range refs {
		at, ok, err := f.b.Next(ctx, r.ID, r.Kind)
		if (err != nil) != (got[i].Err != nil) || ok != got[i].OK || !at.Equal(got[i].At) {
			t.Errorf("%s %s: NextAll = %v, %v, %v; Next = %v, %v, %v", r.ID, r.Kind, got[i].At, got[i].OK, got[i].Err, at, ok, err)
		}
		if got[i].OK {
			armed++
		}
	}
	// a and b: wake and fallback (a's wake twice); gone: its fallback only.
	if armed != 6 {
		t.Errorf("NextAll found %d armed timers, want 6", armed)
	}
}

// A re-arm never leaves the chamber without a timer in the manager (the review of issue 28's
// batching): between the stops and the starts of each group, the wake or the dead-man is still
// loaded, so a wake killed there is still guarded. Stopping both before starting either left
// none.
func TestSystemdRearmKeepsATimer(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "keeps")
	at := soon(time.Hour)
	arm := func() {
		t.Helper()
		if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: at, Argv: f.argv(c, "w")},
			timer.Job{Kind: timer.Fallback, At: at.Add(time.Hour), Argv: f.argv(c, "f")}); err != nil {
			t.Fatal(err)
		}
	}
	arm()
	look := connect(t, f.m.Options())
	seen := 0
	timer.SetAfterStops(func(names []string) {
		seen++
		loaded := 0
		for _, k := range []timer.Kind{timer.Wake, timer.Fallback} {
			if _, ok, err := look.Next(ctx, c.ID, k); err == nil && ok {
				loaded++
			}
		}
		if loaded == 0 {
			t.Errorf("after stopping %v, neither the wake nor the dead-man is loaded", names)
		}
	})
	defer timer.SetAfterStops(nil)
	at = at.Add(time.Minute)
	arm()
	if seen == 0 {
		t.Fatal("the re-arm stopped nothing: the test did not look between stops and starts")
	}
}
