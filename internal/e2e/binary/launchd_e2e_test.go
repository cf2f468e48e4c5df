package binary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/launchctltest"
	"howett.net/plist"
)

// TestLaunchdLifecycle drives the whole CLI through the launchd backend, with the stand-in
// launchctl answering as macOS does (no Mac in CI): start writes and bootstraps the plists and
// reads the calendar back (step 5), status and ps see the chamber, send --wake kickstarts the
// wake job, a wake that launchd fires at load (RunAtLoad) does nothing, and cancel boots out and
// removes every plist.
func TestLaunchdLifecycle(t *testing.T) {
	t.Parallel()
	fake := launchctltest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "mac plan & <notes>")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nbackend = \"launchd\"\nmin_interval = \"1s\"\n",
		"agent.sh":  "#!/bin/sh\necho '[CRYO:EXIT 0] ok'\necho '[CRYO:WAKE +2h]'\n",
	})
	// The stand-in first on PATH; the rest of PATH for the agent's /bin/sh.
	env := []string{"HOME=" + home, "TZ=UTC", "LANG=C.UTF-8"}
	for _, kv := range fake.Env() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + v + ":" + os.Getenv("PATH")
		}
		env = append(env, kv)
	}
	run := func(want int, args ...string) string {
		t.Helper()
		code, out := bin(t, env, dir, args...)
		if code != want {
			t.Fatalf("%v exited %d, want %d:\n%s", args, code, want, out)
		}
		return out
	}

	out := run(0, "start", filepath.Join(dir, "plan.md"))
	for _, want := range []string{"step 4 timer registered           PASS  launchd", "step 5 timer matches wake         PASS  launchd holds ", "step 6 fallback timer registered  PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("start output lacks %q:\n%s", want, out)
		}
	}
	id := timer.ID(dir)
	agents := filepath.Join(home, "Library", "LaunchAgents")
	plists, _ := filepath.Glob(filepath.Join(agents, "dev.cryochamber."+id+".*"))
	if len(plists) != 3 {
		t.Fatalf("want the wake, fallback and inbox plists, got %v", plists)
	}
	if len(fake.Loaded()) != 3 {
		t.Fatalf("loaded jobs: %v", fake.Loaded())
	}

	out = run(0, "status", "--dir", dir, "--json")
	var st chamber.StatusInfo
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	// The dead-man is a periodic job on launchd: status compares with timer.Check, which passes
	// an installed periodic check, and shows what launchd holds for it.
	if st.Backend != "launchd" || len(st.Timers) != 2 || !st.Timers[0].Agree || !st.Timers[1].Agree || !strings.Contains(st.Timers[1].Held, "every") {
		t.Fatalf("status sees %+v", st)
	}
	out = run(0, "ps", "--backend", "launchd")
	if !strings.Contains(out, "armed") || !strings.Contains(out, dir) {
		t.Fatalf("ps:\n%s", out)
	}

	// launchd runs the job when it is loaded (RunAtLoad): that wake finds nothing due.
	out = run(0, "wake", "--dir", dir)
	if !strings.Contains(out, "not due") {
		t.Fatalf("a load-time wake ran a session:\n%s", out)
	}

	// send --wake kickstarts the wake job (without -k: a running session is never killed).
	fake.ResetCalls()
	run(0, "send", "--dir", dir, "--wake", "hello")
	kicked := false
	for _, c := range fake.Calls() {
		if len(c) >= 2 && c[0] == "kickstart" && strings.HasSuffix(c[len(c)-1], ".wake") || len(c) >= 2 && c[0] == "kickstart" && strings.Contains(c[len(c)-1], ".wake.") {
			kicked = true
			for _, a := range c {
				if a == "-k" {
					t.Errorf("kickstart with -k would kill a running session: %v", c)
				}
			}
		}
	}
	if !kicked {
		t.Fatalf("send --wake did not kickstart the wake job: %v", fake.Calls())
	}

	run(0, "cancel", "--dir", dir)
	if plists, _ := filepath.Glob(filepath.Join(agents, "dev.cryochamber."+id+".*")); len(plists) != 0 {
		t.Fatalf("plists left after cancel: %v", plists)
	}
	if len(fake.Loaded()) != 0 {
		t.Fatalf("jobs still loaded after cancel: %v", fake.Loaded())
	}
	out = run(0, "ps", "--backend", "launchd")
	if !strings.Contains(out, "cancelled") {
		t.Fatalf("ps after cancel:\n%s", out)
	}
}

// launchdChamber writes a chamber whose agent asks for wake (an absolute WAKE in UTC, or a
// relative one) and returns the environment to run the CLI with against the stand-in.
func launchdChamber(t *testing.T, fake *launchctltest.Fake, home, dir, wake, tz string) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nbackend = \"launchd\"\n",
		"agent.sh":  "#!/bin/sh\necho '[CRYO:EXIT 0] ok'\necho \"[CRYO:WAKE " + wake + "]\"\n",
	})
	env := []string{"HOME=" + home, "TZ=" + tz, "LANG=C.UTF-8"}
	for _, kv := range fake.Env() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + v + ":" + os.Getenv("PATH")
		}
		env = append(env, kv)
	}
	return env
}

// TestLaunchdPlistIgnoresTZ (issue 15, defect 1): the same WAKE started from shells with
// different $TZ writes the same plists, whose calendar is the WAKE in the zone this machine's
// /etc/localtime names (launchd reads it there, and never sees $TZ). Before, the calendar was
// computed in $TZ: 2027-01-15T14:00Z gave Hour 14, 9 and 23 under UTC, New York and Tokyo.
func TestLaunchdPlistIgnoresTZ(t *testing.T) {
	t.Parallel()
	fake := launchctltest.New(t)
	zone, err := timer.SystemZone("/etc/localtime")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "tz plan")
	wake := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Minute)
	cal, _, err := timer.CalendarFor(wake, zone.Loc)
	if err != nil {
		t.Fatal(err)
	}
	id := timer.ID(dir)
	agents := filepath.Join(home, "Library", "LaunchAgents")
	var first map[string][]byte
	for _, tz := range []string{"UTC", "America/New_York", "Asia/Tokyo"} {
		for _, p := range []string{dir, filepath.Join(home, ".local")} {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
		env := launchdChamber(t, fake, home, dir, wake.Format("2006-01-02T15:04Z"), tz)
		if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
			t.Fatalf("TZ=%s: start exited %d:\n%s", tz, code, out)
		}
		plists := map[string][]byte{}
		for _, job := range []string{"wake", "fallback", "inbox"} {
			name := timer.LaunchdPlistName(timer.LaunchdLabel(id, timer.Kind(job)))
			if job == "inbox" {
				name = timer.LaunchdPlistName(timer.LaunchdInboxLabel(id))
			}
			data, err := os.ReadFile(filepath.Join(agents, name))
			if err != nil {
				// The wake may sit in the alternate slot.
				if data, err = os.ReadFile(filepath.Join(agents, strings.TrimSuffix(name, ".plist")+".alt.plist")); err != nil {
					t.Fatalf("TZ=%s: %v", tz, err)
				}
			}
			plists[job] = data
		}
		var got struct {
			Cal timer.CalendarInterval `plist:"StartCalendarInterval"`
		}
		if _, err := plist.Unmarshal(plists["wake"], &got); err != nil {
			t.Fatal(err)
		}
		if got.Cal != cal {
			t.Errorf("TZ=%s: the wake's calendar is %s, want %s (%s in %s, the system zone)", tz, got.Cal, cal, wake.Format(time.RFC3339), zone.Name)
		}
		if first == nil {
			first = plists
		} else {
			for job, data := range plists {
				if !bytes.Equal(data, first[job]) {
					t.Errorf("TZ=%s: the %s plist differs from the one written under TZ=UTC:\n%s", tz, job, data)
				}
			}
		}
		if code, out := bin(t, env, dir, "cancel", "--dir", dir); code != 0 {
			t.Fatalf("cancel: %d\n%s", code, out)
		}
	}
}

// TestLaunchdSessionsWriteOnce (issue 15, defect 2): three sessions through the CLI write and
// load the dead-man and the inbox watcher once; only the wake, whose time changes, is written
// again.
func TestLaunchdSessionsWriteOnce(t *testing.T) {
	t.Parallel()
	fake := launchctltest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "once")
	env := launchdChamber(t, fake, home, dir, "+${CRYO_SESSION}h", "UTC") // a new time every session
	if code, out := bin(t, env, dir, "start", filepath.Join(dir, "plan.md")); code != 0 {
		t.Fatalf("start exited %d:\n%s", code, out)
	}
	id := timer.ID(dir)
	agents := filepath.Join(home, "Library", "LaunchAgents")
	stat := func(label string) os.FileInfo {
		fi, err := os.Stat(filepath.Join(agents, timer.LaunchdPlistName(label)))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	fb, in := timer.LaunchdLabel(id, timer.Fallback), timer.LaunchdInboxLabel(id)
	fbInfo, inInfo := stat(fb), stat(in)
	for session := 2; session <= 3; session++ {
		if code, out := bin(t, env, dir, "wake", "--dir", dir, "--now"); code != 0 || !strings.Contains(out, fmt.Sprintf("session %d", session)) {
			t.Fatalf("wake --now (session %d) exited %d:\n%s", session, code, out)
		}
	}
	if fi := stat(fb); !os.SameFile(fi, fbInfo) || !fi.ModTime().Equal(fbInfo.ModTime()) {
		t.Error("a session rewrote the dead-man's plist")
	}
	if fi := stat(in); !os.SameFile(fi, inInfo) || !fi.ModTime().Equal(inInfo.ModTime()) {
		t.Error("a session rewrote the inbox watcher's plist")
	}
	boots := fake.Bootstraps()
	if boots["gui/"+fmt.Sprint(os.Getuid())+"/"+fb] != 1 || boots["gui/"+fmt.Sprint(os.Getuid())+"/"+in] != 1 {
		t.Errorf("bootstraps over 3 sessions: %v (want the dead-man and the watcher once)", boots)
	}
	wakes := 0
	for target, n := range boots {
		if strings.Contains(target, ".wake") {
			wakes += n
		}
	}
	if wakes != 3 {
		t.Errorf("the wake was loaded %d times over 3 sessions, want 3: %v", wakes, boots)
	}
}

// TestMacosCheckScript: scripts/macos-check.sh is for a real Mac; here it must at least parse,
// and refuse to run, saying why.
func TestMacosCheckScript(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is needed to check scripts/macos-check.sh: %v", err)
	}
	if out, err := exec.Command(bash, "-n", filepath.Join(fixture.Repo(t), "scripts", "macos-check.sh")).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	if runtime.GOOS == "darwin" {
		return // it would start a real chamber
	}
	out, err := exec.Command(bash, filepath.Join(fixture.Repo(t), "scripts", "macos-check.sh")).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "macos-check: this is for macOS") {
		t.Fatalf("off macOS: %v\n%s", err, out)
	}
}
