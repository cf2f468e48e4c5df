package binary

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// TestPinnedCopiesPruned: the old copies of cryochamber pinned for the dead-man timers
// (~/.local/state/cryochamber/bin/, one per build: issue 23's leftover, docs/RELIABILITY.md "Ways
// a plan can stop") are removed when nothing can run them any more, and never one that an armed
// timer still runs. Against a private systemd user manager: chamber D is started by build 1 and
// its pin.json then removed (a cleanup), so that copy 1 is named by D's armed dead-man alone;
// chamber A is reloaded by builds 2 to 7 (each a build of its own, as an upgrade in place
// makes). Copies unused at one look and still unused at a look a day later (the clock of the
// commands moved on with CRYOCHAMBER_NOW) are removed; copy 1, the newest two and A's own stay;
// D's dead-man still runs its copy. A prune killed (kill -9) after it renamed a copy away leaves
// every copy under its own name whole, and the next prune removes what it left.
func TestPinnedCopiesPruned(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	bin := filepath.Join(fixture.StateDir(m), "bin")
	installed := filepath.Join(t.TempDir(), "opt", "cryochamber")
	base, err := os.ReadFile(fixture.Binary())
	if err != nil {
		t.Fatal(err)
	}
	builds := t.TempDir()
	copyOf := map[int]string{} // build → the name of its copy
	install := func(i int) {
		t.Helper()
		// The same program with bytes of its own at the end: another build to cryochamber.
		data := append(append([]byte(nil), base...), fmt.Sprintf("\nbuild %d\n", i)...)
		sum := sha256.Sum256(data)
		copyOf[i] = hex.EncodeToString(sum[:])[:16]
		p := filepath.Join(builds, fmt.Sprint(i))
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		installBinary(t, p, installed)
	}
	copies := func() []string {
		t.Helper()
		ents, err := os.ReadDir(bin)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, e.Name())
			}
		}
		sort.Strings(out)
		return out
	}
	want := func(builds ...int) []string {
		var out []string
		for _, i := range builds {
			out = append(out, copyOf[i])
		}
		sort.Strings(out)
		return out
	}
	// whole checks that every copy under its own name holds the build its name says.
	whole := func() {
		t.Helper()
		for _, name := range copies() {
			if strings.HasPrefix(name, ".") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(bin, name, "cryochamber"))
			sum := sha256.Sum256(data)
			if err != nil || hex.EncodeToString(sum[:])[:16] != name {
				t.Errorf("the copy %s is not whole (%v, %d bytes)", name, err, len(data))
			}
		}
	}
	toml := "agent = \"./agent.sh\"\nmin_interval = \"1s\"\nwatch_inbox = false\n"
	// A wake a month away: every reload below, its clock days on, arms the timers again (with
	// the copy it pinned), as a reload before the wake does.
	agent := "#!/bin/sh\necho \"[CRYO:EXIT 0] ok\"\necho \"[CRYO:WAKE +30d]\"\n"

	install(1)
	d := newTrial(t, m, toml, agent, nil)
	d.bin = installed
	d.start(0)
	dID := timer.ID(d.dir)
	a := newTrial(t, m, toml, agent, nil)
	a.bin = installed
	a.start(0)
	for i := 2; i <= 5; i++ {
		install(i)
		a.must(0, "reload", "--yes", "--dir", a.dir)
	}
	if got := copies(); !equalStrings(got, want(1, 2, 3, 4, 5)) {
		t.Fatalf("copies after five builds: %v, want %v", got, want(1, 2, 3, 4, 5))
	}
	// D's pin removed: copy 1 is named by D's armed dead-man alone.
	if err := os.Remove(filepath.Join(fixture.StateDir(m), "chambers", dID, "pin.json")); err != nil {
		t.Fatal(err)
	}
	if unit := m.Systemctl(t, "cat", timer.SystemdServiceName(dID, timer.Fallback)); !strings.Contains(unit, copyOf[1]) {
		t.Fatalf("D's dead-man does not run copy 1: the test does not try what it says\n%s", unit)
	}
	at := func(days int) []string {
		return append(append([]string(nil), a.env...), "CRYOCHAMBER_NOW="+time.Now().UTC().Add(time.Duration(days)*24*time.Hour).Format(time.RFC3339))
	}
	reloadAt := func(days int, extra ...string) (int, string) {
		t.Helper()
		r := fixture.Cmd{Binary: installed, Env: append(at(days), extra...), Dir: a.dir}.Run(t, "reload", "--yes", "--dir", a.dir)
		return r.Code, r.Output
	}

	// The first look, two days on: 2, 3 and 4 are unused, and only marked.
	install(6)
	if code, out := reloadAt(2); code != 0 {
		t.Fatalf("reload: exit %d\n%s", code, out)
	}
	if got := copies(); !equalStrings(got, want(1, 2, 3, 4, 5, 6)) {
		t.Errorf("copies after the first look: %v, want %v (nothing removed at the first look)", got, want(1, 2, 3, 4, 5, 6))
	}
	var marks map[string]time.Time
	if b, err := os.ReadFile(filepath.Join(bin, ".unused.json")); err != nil || json.Unmarshal(b, &marks) != nil {
		t.Fatalf("no marks after the first look: %v", err)
	}
	for _, i := range []int{2, 3, 4} {
		if _, ok := marks[copyOf[i]]; !ok {
			t.Errorf("copy %d is not marked unused: %v", i, marks)
		}
	}
	if _, ok := marks[copyOf[1]]; ok {
		t.Errorf("copy 1, which D's armed dead-man runs, is marked unused")
	}

	// The second look, two days later: removed, but never copy 1.
	code, out := reloadAt(4)
	if code != 0 || !strings.Contains(out, "removed the old copy") {
		t.Fatalf("reload: exit %d\n%s", code, out)
	}
	if got := copies(); !equalStrings(got, want(1, 5, 6)) {
		t.Errorf("copies after the second look: %v, want %v\n%s", got, want(1, 5, 6), out)
	}
	whole()

	// A prune killed after it renamed a copy away.
	install(7)
	if code, out := reloadAt(4); code != 0 {
		t.Fatalf("reload: exit %d\n%s", code, out) // marks copy 5
	}
	if code, out := reloadAt(6, "CRYOCHAMBER_CRASH_AT=copy-renamed"); code != -9 {
		t.Fatalf("reload with CRYOCHAMBER_CRASH_AT=copy-renamed exited %d, want SIGKILL\n%s", code, out)
	}
	whole()
	got := copies()
	if !equalStrings(got, append(want(1, 6, 7), ".prune-"+copyOf[5])) {
		t.Errorf("copies after a prune killed: %v, want %v and .prune-%s", got, want(1, 6, 7), copyOf[5])
	}
	if code, out := reloadAt(6); code != 0 {
		t.Fatalf("reload: exit %d\n%s", code, out)
	}
	if got := copies(); !equalStrings(got, want(1, 6, 7)) {
		t.Errorf("copies after the next prune: %v, want %v", got, want(1, 6, 7))
	}
	whole()

	// D's dead-man still runs its copy: the manager starts it (status 203/EXEC and a failed
	// start when its program is gone; what the check then says of D, whose pin is gone, is
	// another matter).
	fb := timer.SystemdServiceName(dID, timer.Fallback)
	m.Systemctl(t, "start", fb)
	m.WaitIdle(t, 60*time.Second, fb)
	show := m.Systemctl(t, "show", "-p", "ExecMainStatus", "-p", "ExecMainStartTimestampMonotonic", "-p", "Result", fb)
	if strings.Contains(show, "ExecMainStatus=203") || strings.Contains(show, "ExecMainStartTimestampMonotonic=0\n") || strings.Contains(show, "Result=exec") {
		t.Errorf("D's dead-man could not run its copy after the prunes:\n%s\n%s", show, fixture.Tail(m.Journal(t), 3000))
	}
	a.must(0, "cancel", "--dir", a.dir)
	d.run("cancel", "--dir", d.dir)
}

func equalStrings(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
