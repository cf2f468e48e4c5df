package binary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// TestPruneLooksWithoutHoldingPins: a prune of old pinned copies stopped after its looks
// (CRYOCHAMBER_PAUSE_AT=prune-looked, as a Ctrl-Z would stop it) holds up no other chamber's
// pin: chamber B starts meanwhile, pinning build 1, whose copy A's prune found unused at two
// looks a day apart and is about to remove. B's start finishes, and A's prune, let go on,
// keeps copy 1 (handed out since its looks: it looks at the copy's time again under bin/.lock)
// while it removes copy 2; B's dead-man runs copy 1. Before, the prune held bin/.lock across
// its looks, and every pin (start, reload, a wake's re-pin) waited for it without limit.
func TestPruneLooksWithoutHoldingPins(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	bin := filepath.Join(fixture.StateDir(m), "bin")
	installedA := filepath.Join(t.TempDir(), "a", "cryochamber")
	installedB := filepath.Join(t.TempDir(), "b", "cryochamber")
	bs := newPruneBuilds(t, bin)
	toml := "agent = \"./agent.sh\"\nmin_interval = \"1s\"\nwatch_inbox = false\n"
	agent := "#!/bin/sh\necho \"[CRYO:EXIT 0] ok\"\necho \"[CRYO:WAKE +30d]\"\n"
	bs.install(1, installedA)
	a := newTrial(t, m, toml, agent, nil)
	a.bin = installedA
	a.start(0)
	for i := 2; i <= 4; i++ {
		bs.install(i, installedA)
		a.must(0, "reload", "--yes", "--dir", a.dir)
	}
	at := func(days int) string {
		return "CRYOCHAMBER_NOW=" + time.Now().UTC().Add(time.Duration(days)*24*time.Hour).Format(time.RFC3339)
	}
	reloadA := func(extra ...string) fixture.Cmd {
		return fixture.Cmd{Binary: installedA, Env: append(append([]string(nil), a.env...), extra...), Dir: a.dir}
	}
	if r := reloadA(at(2)).Run(t, "reload", "--yes", "--dir", a.dir); r.Code != 0 {
		t.Fatalf("reload: exit %d\n%s", r.Code, r.Output) // marks copies 1 and 2 unused
	}

	// The second look, stopped after its looks.
	pause := filepath.Join(t.TempDir(), "paused")
	p := reloadA(at(4), "CRYOCHAMBER_PAUSE_AT=prune-looked", "CRYOCHAMBER_PAUSE_FILE="+pause).Start(t, "reload", "--yes", "--dir", a.dir)
	fixture.WaitFor(t, 50*time.Second, "A's prune to pause after its looks", func() bool {
		select {
		case <-p.Done():
			t.Fatalf("A's reload ended without pausing after its looks:\n%s", p.Output())
		default:
		}
		return fixture.Exists(pause)
	})

	// Meanwhile B starts with build 1 (its clock the prune's: the copy's time is on it).
	bs.install(1, installedB)
	b := newTrial(t, m, toml, agent, nil)
	b.bin = installedB
	b.env = append(b.env, at(4))
	started := make(chan string, 1)
	go func() { started <- b.cmd().Try("start", filepath.Join(b.dir, "plan.md")).Output }()
	select {
	case out := <-started:
		if !fixture.Exists(filepath.Join(bin, bs.copyOf[1], "cryochamber")) {
			t.Fatalf("B's start did not pin copy 1:\n%s", out)
		}
	case <-time.After(45 * time.Second): // a hang, not a speed: the pause lasts a minute at most
		t.Fatal("B's start waited for A's stopped prune")
	}
	if err := os.Remove(pause); err != nil {
		t.Fatal(err)
	}
	r := p.Wait(t, time.Minute)
	if r.Code != 0 {
		t.Fatalf("A's reload: exit %d\n%s", r.Code, r.Output)
	}
	if got, want := bs.copies(), bs.want(1, 3, 4); !equalStrings(got, want) {
		t.Errorf("copies after A's prune: %v, want %v (copy 1 handed out to B since the looks, copy 2 removed)\n%s", got, want, r.Output)
	}
	unit := m.Systemctl(t, "cat", timer.SystemdServiceName(timer.ID(b.dir), timer.Fallback))
	if !strings.Contains(unit, bs.copyOf[1]) {
		t.Errorf("B's dead-man does not run copy 1:\n%s", unit)
	}
	a.must(0, "cancel", "--dir", a.dir)
	b.must(0, "cancel", "--dir", b.dir)
}
