package timer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer/launchctltest"
)

// launchdEnv is one backend driving a stand-in launchctl, with a fixed clock.
type launchdEnv struct {
	b         *launchdBackend
	fake      *launchctltest.Fake
	c         Chamber
	bin       string
	now       time.Time
	localtime string // the fake /etc/localtime link (see fakeLocaltime)
}

// fakeLocaltime makes a link shaped like macOS's /etc/localtime, pointing into a
// var/db/timezone/zoneinfo tree that holds a copy of the zone's TZif file from the system's tz
// database (Debian: tzdata). It returns the link's path.
func fakeLocaltime(t testing.TB, name string) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "localtime")
	setLocaltime(t, link, name)
	return link
}

// setLocaltime points the link at another zone, as System Settings does when the Mac moves.
func setLocaltime(t testing.TB, link, name string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/usr/share/zoneinfo", name))
	if err != nil {
		t.Skipf("time zone %s is not in /usr/share/zoneinfo (install tzdata): %v", name, err)
	}
	dst := filepath.Join(filepath.Dir(link), "var", "db", "timezone", "zoneinfo", name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.Symlink(dst, link); err != nil {
		t.Fatal(err)
	}
}

const testUID = 501

func newLaunchdEnv(t *testing.T, extraEnv ...string) *launchdEnv {
	t.Helper()
	fake := launchctltest.New(t)
	return newLaunchdEnvWith(t, fake, fake.Env(extraEnv...))
}

func newLaunchdEnvWith(t *testing.T, fake *launchctltest.Fake, env []string) *launchdEnv {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "plans", `garden & <co> "x"`)
	e := &launchdEnv{fake: fake, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), bin: "/usr/local/bin/cryochamber"}
	e.c = Chamber{ID: ID(dir), Dir: dir, EnvFile: filepath.Join(dir, ".cryo", "env"),
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=" + home},
		Stdout: filepath.Join(dir, ".cryo", "launchd.out"), Stderr: filepath.Join(dir, ".cryo", "launchd.err")}
	e.localtime = fakeLocaltime(t, "Europe/Berlin")
	b, err := NewLaunchd(context.Background(), LaunchdOptions{
		AgentsDir: filepath.Join(home, "Library", "LaunchAgents"),
		UID:       testUID,
		Localtime: e.localtime,
		Env:       env,
		Now:       func() time.Time { return e.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	e.b = b.(*launchdBackend)
	// Keep the retries, shorten the waits.
	e.b.bootstrapDelays = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	e.b.unloadPolls = []time.Duration{time.Millisecond, time.Millisecond}
	return e
}

func (e *launchdEnv) job(k Kind, at time.Time) Job {
	return Job{Kind: k, At: at, Argv: []string{e.bin, string(k), "--dir", e.c.Dir}}
}

func (e *launchdEnv) target(label string) string { return "gui/501/" + label }

func (e *launchdEnv) plistPath(label string) string {
	return filepath.Join(e.b.o.AgentsDir, LaunchdPlistName(label))
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func wantCalls(t *testing.T, e *launchdEnv, want ...string) {
	t.Helper()
	if got := e.fake.Subcommands(); !slices.Equal(got, want) {
		t.Errorf("launchctl calls:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	e.fake.ResetCalls()
}

func TestLaunchdArmNextDisarm(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	wake := LaunchdLabel(e.c.ID, Wake)
	alt := wake + altSuffix
	at := time.Date(2026, 3, 8, 9, 0, 30, 0, time.UTC) // 10:00:30 in Berlin → 10:01

	if _, ok, err := e.b.Next(ctx, e.c.ID, Wake); ok || err != nil {
		t.Fatalf("Next before Arm = %v, %v", ok, err)
	}
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(wake), "print "+e.target(alt), "bootstrap gui/501")
	if calls := e.fake.Calls(); len(calls) != 0 {
		t.Fatalf("ResetCalls left %q", calls)
	}
	fi, err := os.Stat(e.plistPath(wake))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("plist mode %v, want 0644", fi.Mode().Perm())
	}
	j, ok := e.fake.Job(e.target(wake))
	if !ok {
		t.Fatalf("%s not loaded; loaded: %q", wake, e.fake.Loaded())
	}
	if !slices.Equal(j.Arguments, e.job(Wake, at).Argv) || j.WorkingDirectory != e.c.Dir || j.Path != e.plistPath(wake) ||
		j.Env["HOME"] != strings.TrimPrefix(e.c.Env[1], "HOME=") || !j.RunAtLoad || j.Runs != 1 {
		t.Errorf("loaded job = %+v", j)
	}
	if len(j.Calendars) != 1 || j.Calendars[0]["Hour"] != 10 || j.Calendars[0]["Minute"] != 1 {
		t.Errorf("loaded calendar = %v, want 10:01", j.Calendars)
	}

	next, ok, err := e.b.Next(ctx, e.c.ID, Wake)
	if err != nil || !ok || !next.Equal(time.Date(2026, 3, 8, 9, 1, 0, 0, time.UTC)) || next.Location() != time.UTC {
		t.Fatalf("Next = %s, %v, %v; want 2026-03-08T09:01:00Z", next, ok, err)
	}
	wantCalls(t, e, "print "+e.target(wake))

	// Re-arm: the idle job is unloaded and loaded again from the new file.
	at2 := at.Add(48 * time.Hour)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at2)); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(wake), "print "+e.target(alt), "bootout "+e.target(wake), "bootstrap gui/501")
	if next, ok, err := e.b.Next(ctx, e.c.ID, Wake); err != nil || !ok || !next.Equal(time.Date(2026, 3, 10, 9, 1, 0, 0, time.UTC)) {
		t.Fatalf("Next after re-arm = %s, %v, %v", next, ok, err)
	}
	// The fallback is its own agent: the periodic dead-man, whose next check is at most its
	// period away.
	if err := e.b.Arm(ctx, e.c, e.job(Fallback, at2.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := e.b.Next(ctx, e.c.ID, Fallback); err != nil || !ok || !next.Equal(e.now.Add(LaunchdDeadManEvery)) {
		t.Fatalf("Next(Fallback) = %s, %v, %v", next, ok, err)
	}
	e.fake.ResetCalls()

	if err := e.b.Disarm(ctx, e.c.ID, Wake); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(wake), "print "+e.target(alt), "bootout "+e.target(wake))
	if fileExists(e.plistPath(wake)) {
		t.Error("Disarm left the plist")
	}
	if _, ok := e.fake.Job(e.target(wake)); ok {
		t.Error("Disarm left the job loaded")
	}
	if _, ok, err := e.b.Next(ctx, e.c.ID, Wake); ok || err != nil {
		t.Errorf("Next after Disarm = %v, %v", ok, err)
	}
	// Idempotent.
	if err := e.b.Disarm(ctx, e.c.ID, Wake); err != nil {
		t.Errorf("second Disarm: %v", err)
	}
	if _, ok := e.fake.Job(e.target(LaunchdLabel(e.c.ID, Fallback))); !ok {
		t.Error("Disarm(Wake) unloaded the fallback")
	}
	if k := e.fake.State().Killed; len(k) != 0 {
		t.Errorf("running jobs were killed: %q", k)
	}
}

// TestLaunchdArmFromItsOwnSession: the wake re-arms its own timer while it runs as that job.
// Booting the job out would kill the session, so the alternate slot takes the new time, and
// the slots swap at every wake.
func TestLaunchdArmFromItsOwnSession(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	wake := LaunchdLabel(e.c.ID, Wake)
	alt := wake + altSuffix
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
		t.Fatal(err)
	}
	// The calendar fires: session 2 runs as the wake job and arms session 3.
	e.fake.SetRunning(e.target(wake), 4242)
	e.fake.ResetCalls()
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at.AddDate(0, 0, 1))); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(wake), "print "+e.target(alt), "bootstrap gui/501")
	if fileExists(e.plistPath(wake)) || !fileExists(e.plistPath(alt)) {
		t.Errorf("files: %s %v, %s %v", wake, fileExists(e.plistPath(wake)), alt, fileExists(e.plistPath(alt)))
	}
	if j, ok := e.fake.Job(e.target(wake)); !ok || !j.Running {
		t.Errorf("the running session's job: %+v, %v", j, ok)
	}
	if next, ok, err := e.b.Next(ctx, e.c.ID, Wake); err != nil || !ok || !next.Equal(at.AddDate(0, 0, 1)) {
		t.Fatalf("Next = %s, %v, %v; want the alternate slot's time", next, ok, err)
	}
	if err := e.b.RunNow(ctx, e.c.ID); err != nil {
		t.Fatal(err)
	}
	if c := e.fake.Calls(); !slices.Equal(c[len(c)-1], []string{"kickstart", e.target(alt)}) {
		t.Errorf("RunNow called %q", c[len(c)-1])
	}
	e.fake.ResetCalls()

	// Session 2 ends; session 3 runs as the alternate job and arms session 4 in the first slot,
	// which is idle now and still loaded with session 2's old time.
	e.fake.SetRunning(e.target(wake), 0)
	e.fake.SetRunning(e.target(alt), 4343)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at.AddDate(0, 0, 2))); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(wake), "print "+e.target(alt), "bootout "+e.target(wake), "bootstrap gui/501")
	if next, ok, err := e.b.Next(ctx, e.c.ID, Wake); err != nil || !ok || !next.Equal(at.AddDate(0, 0, 2)) {
		t.Fatalf("Next = %s, %v, %v", next, ok, err)
	}
	e.fake.ResetCalls()

	// The plan completes in session 3: Disarm leaves its own job loaded (it cannot be unloaded
	// without killing it) but removes every file, and unloads the idle slot.
	if err := e.b.Disarm(ctx, e.c.ID, Wake); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(wake), "print "+e.target(alt), "bootout "+e.target(wake))
	if fileExists(e.plistPath(wake)) || fileExists(e.plistPath(alt)) {
		t.Error("Disarm left a plist")
	}
	if got := e.fake.Loaded(); !slices.Equal(got, []string{e.target(alt)}) {
		t.Errorf("loaded after Disarm: %q", got)
	}
	if _, ok, err := e.b.Next(ctx, e.c.ID, Wake); ok || err != nil {
		t.Errorf("Next after Disarm = %v, %v", ok, err)
	}
	// The next command outside the session cleans the leftover up.
	e.fake.SetRunning(e.target(alt), 0)
	if err := e.b.Disarm(ctx, e.c.ID, Wake); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Loaded(); len(got) != 0 {
		t.Errorf("loaded after the second Disarm: %q", got)
	}
	if k := e.fake.State().Killed; len(k) != 0 {
		t.Errorf("running sessions were killed: %q", k)
	}
}

func TestLaunchdArmBothRunning(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	wake := LaunchdLabel(e.c.ID, Wake)
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
		t.Fatal(err)
	}
	e.fake.SetRunning(e.target(wake), 1)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	e.fake.SetRunning(e.target(wake+altSuffix), 2)
	err := e.b.Arm(ctx, e.c, e.job(Wake, at.Add(2*time.Hour)))
	if err == nil || !strings.Contains(err.Error(), "both "+wake+" and "+wake+altSuffix+" are running; arm again") {
		t.Fatalf("Arm with both slots running: %v", err)
	}
	if k := e.fake.State().Killed; len(k) != 0 {
		t.Errorf("running sessions were killed: %q", k)
	}
}

// TestLaunchdBootstrapRetry: launchd still holds a label it was told to unload and answers
// "5: Input/output error" to the bootstrap that follows; Arm retries.
func TestLaunchdBootstrapRetry(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	t.Run("recovers", func(t *testing.T) {
		e := newLaunchdEnv(t, launchctltest.EnvLinger+"=2")
		wake := LaunchdLabel(e.c.ID, Wake)
		if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
			t.Fatal(err)
		}
		e.fake.ResetCalls()
		if err := e.b.Arm(ctx, e.c, e.job(Wake, at.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		// At the first 5 it asks whether the label is disabled and the GUI domain there: neither,
		// so it retries.
		wantCalls(t, e, "print "+e.target(wake), "print "+e.target(wake+altSuffix), "bootout "+e.target(wake),
			"bootstrap gui/501", "print-disabled gui/501", "print gui/501", "bootstrap gui/501", "bootstrap gui/501")
		if next, ok, err := e.b.Next(ctx, e.c.ID, Wake); err != nil || !ok || !next.Equal(at.Add(time.Hour)) {
			t.Errorf("Next = %s, %v, %v", next, ok, err)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		e := newLaunchdEnv(t, launchctltest.EnvLinger+"=10")
		wake := LaunchdLabel(e.c.ID, Wake)
		if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
			t.Fatal(err)
		}
		e.fake.ResetCalls()
		err := e.b.Arm(ctx, e.c, e.job(Wake, at.Add(time.Hour)))
		for _, want := range []string{"Bootstrap failed: 5: Input/output error", "still refused after 4 attempts over 3ms",
			"launchctl bootout gui/501/" + wake, "plutil -lint"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Arm error = %v, want %q", err, want)
			}
		}
		if n := strings.Count(strings.Join(e.fake.Subcommands(), "\n"), "bootstrap"); n != 4 {
			t.Errorf("%d bootstrap attempts, want 4", n)
		}
	})
	t.Run("context ends the wait", func(t *testing.T) {
		e := newLaunchdEnv(t, launchctltest.EnvLinger+"=10")
		if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
			t.Fatal(err)
		}
		e.b.bootstrapDelays = []time.Duration{time.Hour}
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		err := e.b.Arm(cctx, e.c, e.job(Wake, at.Add(time.Hour)))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Input/output error") {
			t.Errorf("Arm error = %v", err)
		}
	})
}

// TestLaunchdBootoutInProgress: launchd answers bootout of a job with "36: Operation now in
// progress" and lets it go a little later (osquery/osquery#5698); the re-arm waits for it and
// then loads the new plist.
func TestLaunchdBootoutInProgress(t *testing.T) {
	ctx := context.Background()
	e := newLaunchdEnv(t, launchctltest.EnvInProgress+"=1")
	wake := LaunchdLabel(e.c.ID, Wake)
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCalls()
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(wake), "print "+e.target(wake+altSuffix), "bootout "+e.target(wake),
		"print "+e.target(wake), "print "+e.target(wake), "bootstrap gui/501")
	if next, ok, err := e.b.Next(ctx, e.c.ID, Wake); err != nil || !ok || !next.Equal(at.Add(time.Hour)) {
		t.Errorf("Next = %s, %v, %v", next, ok, err)
	}
}

func TestLaunchdBootoutNotLoaded(t *testing.T) {
	ctx := context.Background()
	for _, env := range [][]string{nil, {launchctltest.EnvESRCH + "=1"}} {
		e := newLaunchdEnv(t, env...)
		if err := e.b.bootout(ctx, LaunchdLabel(e.c.ID, Wake)); err != nil {
			t.Errorf("bootout of an unknown label (%q): %v", env, err)
		}
	}
}

// TestLaunchdDisabled: a label disabled with `launchctl disable` is refused by bootstrap with
// 119 on some Macs and with a bare 5 on many others (see the stand-in's replies). Either way
// Arm stops at the first refusal, says it is disabled (from print-disabled, in either layout),
// and names the command that allows it again; it never enables it by itself.
func TestLaunchdDisabled(t *testing.T) {
	for _, answer := range []int{119, 5} {
		for _, layout := range []string{"modern", "legacy"} {
			t.Run(fmt.Sprintf("%d/%s", answer, layout), func(t *testing.T) {
				e := newLaunchdEnv(t)
				wake := LaunchdLabel(e.c.ID, Wake)
				e.fake.Disable(e.target(wake), answer)
				e.fake.SetDisabledLayout(layout)
				err := e.b.Arm(context.Background(), e.c, e.job(Wake, time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)))
				if !errors.Is(err, ErrDisabled) || !strings.Contains(err.Error(), "launchd has "+wake+" disabled") {
					t.Fatalf("Arm of a disabled agent: %v", err)
				}
				var he *HintError
				if !errors.As(err, &he) || he.Hint != "if you did not disable it on purpose, run `launchctl enable gui/501/"+wake+"` and arm again" {
					t.Errorf("hint: %+v", he)
				}
				if n := strings.Count(strings.Join(e.fake.Subcommands(), "\n"), "bootstrap"); n != 1 {
					t.Errorf("%d bootstrap attempts for a disabled agent, want 1 (retrying cannot cure it)", n)
				}
				for _, c := range e.fake.Calls() {
					if c[0] == "enable" {
						t.Errorf("Arm enabled the label by itself: %q", c)
					}
				}
				if w := e.b.Warnings(context.Background()); !slices.ContainsFunc(w, func(s string) bool {
					return strings.Contains(s, "launchd has "+wake+" disabled") && strings.Contains(s, "launchctl enable gui/501/"+wake)
				}) {
					t.Errorf("Warnings = %q", w)
				}
			})
		}
	}
}

// TestLaunchdNoGUISession: with nobody logged in to the desktop (SSH only) the gui domain does
// not exist. Preflight says so before session 1, with how to log in; Arm refuses without
// writing a plist (launchd would load it at the next login, against timer.json); cancel still
// removes the files.
func TestLaunchdNoGUISession(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	for _, mode := range []string{"112", "125", "5"} {
		t.Run(mode, func(t *testing.T) {
			e := newLaunchdEnv(t)
			if err := e.b.Arm(ctx, e.c, e.job(Wake, at), e.job(Fallback, at)); err != nil {
				t.Fatal(err)
			}
			wake, fb := e.plistPath(LaunchdLabel(e.c.ID, Wake)), e.plistPath(LaunchdLabel(e.c.ID, Fallback))
			before, err := os.ReadFile(wake)
			if err != nil {
				t.Fatal(err)
			}
			e.fake.SetNoGUI(mode)
			e.fake.ResetCalls()
			checkNoSession := func(what string, err error) {
				t.Helper()
				var he *HintError
				if !errors.Is(err, ErrNoSession) || !errors.As(err, &he) ||
					!strings.Contains(err.Error(), "launchd has no gui/501 domain, which exists only while user 501 is logged in to this Mac's desktop") ||
					!strings.HasPrefix(he.Hint, "log in to this Mac's desktop as this user") {
					t.Errorf("%s: %v", what, err)
				}
			}
			checkNoSession("Preflight", Preflight(ctx, e.b))
			checkNoSession("Arm", e.b.Arm(ctx, e.c, e.job(Wake, at.Add(time.Hour))))
			if after, _ := os.ReadFile(wake); !bytes.Equal(after, before) || fileExists(e.plistPath(LaunchdLabel(e.c.ID, Wake)+altSuffix)) {
				t.Error("Arm wrote a plist without a GUI session")
			}
			for _, c := range e.fake.Subcommands() {
				if strings.HasPrefix(c, "bootstrap") || strings.HasPrefix(c, "bootout") {
					t.Errorf("Arm without a GUI session called %s", c)
				}
			}
			checkNoSession("RunNow", e.b.RunNow(ctx, e.c.ID))
			if w := e.b.Warnings(ctx); len(w) != 1 || !strings.Contains(w[0], "user 501 is not logged in to this Mac's desktop") {
				t.Errorf("Warnings = %q", w)
			}
			for _, k := range Kinds {
				if err := e.b.Disarm(ctx, e.c.ID, k); err != nil {
					t.Errorf("Disarm(%s) without a GUI session: %v", k, err)
				}
			}
			if fileExists(wake) || fileExists(fb) {
				t.Errorf("Disarm without a GUI session left plists")
			}
			e.fake.SetNoGUI("")
			if err := Preflight(ctx, e.b); err != nil {
				t.Errorf("Preflight once logged in: %v", err)
			}
		})
	}
}

func TestLaunchdWatch(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	inbox := LaunchdInboxLabel(e.c.ID)
	dir := filepath.Join(e.c.Dir, "messages", "inbox")
	argv := []string{e.bin, "wake", "--dir", e.c.Dir}
	if err := e.b.Watch(ctx, e.c, dir, argv); err != nil {
		t.Fatal(err)
	}
	j, ok := e.fake.Job(e.target(inbox))
	if !ok || !slices.Equal(j.WatchPaths, []string{dir}) || !slices.Equal(j.Arguments, argv) || j.RunAtLoad || len(j.Calendars) != 0 {
		t.Fatalf("inbox job = %+v, %v", j, ok)
	}
	// Watched again by the wake the watcher started: nothing to reload.
	e.fake.SetRunning(e.target(inbox), 77)
	e.fake.ResetCalls()
	if err := e.b.Watch(ctx, e.c, dir, argv); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, e, "print "+e.target(inbox), "print "+e.target(inbox+altSuffix))
	// Next ignores the watcher, which has no calendar.
	if _, ok, err := e.b.Next(ctx, e.c.ID, Wake); ok || err != nil {
		t.Errorf("Next(Wake) with only a watcher = %v, %v", ok, err)
	}
	e.fake.SetRunning(e.target(inbox), 0)
	if err := e.b.Unwatch(ctx, e.c.ID); err != nil {
		t.Fatal(err)
	}
	if fileExists(e.plistPath(inbox)) || len(e.fake.Loaded()) != 0 {
		t.Errorf("Unwatch left %v, %q", fileExists(e.plistPath(inbox)), e.fake.Loaded())
	}
	if err := e.b.Unwatch(ctx, e.c.ID); err != nil {
		t.Errorf("second Unwatch: %v", err)
	}
}

func TestLaunchdRunNow(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	wake := LaunchdLabel(e.c.ID, Wake)
	if err := e.b.RunNow(ctx, e.c.ID); err == nil || !strings.Contains(err.Error(), "no such agent in "+e.b.o.AgentsDir+" (is the chamber started?)") {
		t.Fatalf("RunNow before Arm: %v", err)
	}
	if err := e.b.Arm(ctx, e.c, e.job(Wake, time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCalls()
	if err := e.b.RunNow(ctx, e.c.ID); err != nil {
		t.Fatal(err)
	}
	// Without -k: a session that is running must not be killed.
	if c := e.fake.Calls(); len(c) != 1 || !slices.Equal(c[0], []string{"kickstart", e.target(wake)}) {
		t.Errorf("RunNow called %q", c)
	}
	if s := e.fake.State(); !slices.Equal(s.Kicked, []string{e.target(wake)}) || s.Jobs[e.target(wake)].Runs != 2 {
		t.Errorf("kicked %q, runs %d", s.Kicked, s.Jobs[e.target(wake)].Runs)
	}
	// The plist is there but launchd lost the job (a logout, a hand-made bootout).
	if err := e.b.bootout(ctx, wake); err != nil {
		t.Fatal(err)
	}
	err := e.b.RunNow(ctx, e.c.ID)
	if err == nil || !strings.Contains(err.Error(), "exit status 113: Could not find service") || !strings.Contains(err.Error(), "is not loaded (arm the chamber again") {
		t.Errorf("RunNow of an unloaded job: %v", err)
	}
}

func TestLaunchdInstalled(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	if in, err := e.b.Installed(ctx); err != nil || len(in) != 0 {
		t.Fatalf("Installed with no agents directory = %v, %v", in, err)
	}
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at)); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Arm(ctx, e.c, e.job(Fallback, at.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	// A second chamber with only a watcher, whose wake runs in the alternate slot.
	dir2 := filepath.Join(filepath.Dir(e.c.Dir), "other")
	c2 := e.c
	c2.ID, c2.Dir = ID(dir2), dir2
	if err := e.b.Watch(ctx, c2, filepath.Join(dir2, "messages", "inbox"), []string{e.bin, "wake", "--dir", dir2}); err != nil {
		t.Fatal(err)
	}
	// Files that are not ours, or not readable as ours.
	junk := map[string]string{
		"com.example.agent.plist":                             "<plist/>",
		LabelPrefix + "cryo-Bad-00000000.wake.plist":          "x",
		LabelPrefix + e.c.ID + ".daily.plist":                 "x",
		LabelPrefix + "cryo-broken-00000000.fallback.plist":   "not a plist",
		LabelPrefix + "cryo-other-11111111.wake.alt.plist.sw": "x",
	}
	for name, content := range junk {
		if err := os.WriteFile(filepath.Join(e.b.o.AgentsDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(e.b.o.AgentsDir, LabelPrefix+"cryo-dir-00000000.wake.plist"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := e.b.Installed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Installed{
		{ID: "cryo-broken-00000000", Kinds: []Kind{Fallback}},
		{ID: e.c.ID, Dir: e.c.Dir, Kinds: []Kind{Wake, Fallback}},
		{ID: c2.ID, Dir: dir2, Watch: true},
	}
	slices.SortFunc(want, func(a, b Installed) int { return strings.Compare(a.ID, b.ID) })
	if len(in) != len(want) {
		t.Fatalf("Installed = %+v, want %+v", in, want)
	}
	for i := range want {
		if in[i].ID != want[i].ID || in[i].Dir != want[i].Dir || !slices.Equal(in[i].Kinds, want[i].Kinds) || in[i].Watch != want[i].Watch {
			t.Errorf("Installed[%d] = %+v, want %+v", i, in[i], want[i])
		}
	}
	// An agent in the alternate slot counts the same.
	e.fake.SetRunning(e.target(LaunchdLabel(e.c.ID, Wake)), 5)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, at.Add(24*time.Hour))); err != nil {
		t.Fatal(err)
	}
	in, err = e.b.Installed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range in {
		if x.ID == e.c.ID && (x.Dir != e.c.Dir || !slices.Equal(x.Kinds, []Kind{Wake, Fallback})) {
			t.Errorf("with the alternate slot: %+v", x)
		}
	}
}

func TestLaunchdWarnings(t *testing.T) {
	e := newLaunchdEnv(t)
	if w := e.b.Warnings(context.Background()); len(w) != 0 {
		t.Errorf("Warnings = %q", w)
	}
	e.b.o.AgentsDir = "/tmp/agents"
	if w := e.b.Warnings(context.Background()); len(w) != 1 || !strings.Contains(w[0], "agents directory /tmp/agents is not ~/Library/LaunchAgents") {
		t.Errorf("Warnings = %q", w)
	}
}

func TestLaunchdUnavailable(t *testing.T) {
	ctx := context.Background()
	o := LaunchdOptions{AgentsDir: "/Users/a/Library/LaunchAgents", UID: 501, Localtime: "/etc/localtime", Now: time.Now}
	for _, tt := range []struct {
		name      string
		launchctl string
		env       []string
		want      string
	}{
		{"empty PATH", "", []string{"PATH=" + t.TempDir()}, "no launchctl on PATH " + ""},
		{"missing path", "/nonexistent/launchctl", nil, "/nonexistent/launchctl is not an executable file"},
		{"relative", "bin/launchctl", nil, `"bin/launchctl" is not an absolute path`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := o
			o.Launchctl, o.Env = tt.launchctl, tt.env
			_, err := NewLaunchd(ctx, o)
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("NewLaunchd error = %v, want ErrUnavailable", err)
			}
			if !strings.Contains(err.Error(), "launchctl not found: launchd agents need macOS") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewLaunchd error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestNewLaunchdRefuses(t *testing.T) {
	ok := LaunchdOptions{AgentsDir: "/Users/a/Library/LaunchAgents", UID: 501, Localtime: "/etc/localtime", Now: time.Now, Launchctl: "/bin/sh"}
	for _, tt := range []struct {
		name string
		edit func(*LaunchdOptions)
		want string
	}{
		{"relative dir", func(o *LaunchdOptions) { o.AgentsDir = "Library/LaunchAgents" }, `agents directory "Library/LaunchAgents" is not an absolute path`},
		{"uid", func(o *LaunchdOptions) { o.UID = -1 }, "invalid uid -1"},
		{"zone", func(o *LaunchdOptions) { o.Localtime = "" }, `time zone link "" is not an absolute path`},
		{"relative zone", func(o *LaunchdOptions) { o.Localtime = "etc/localtime" }, `time zone link "etc/localtime" is not an absolute path`},
		{"clock", func(o *LaunchdOptions) { o.Now = nil }, "no clock given"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			_, err := NewLaunchd(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("NewLaunchd error = %v, want %q", err, tt.want)
			}
		})
	}
	b, err := NewLaunchd(context.Background(), ok)
	if err != nil || b.Name() != "launchd" {
		t.Fatalf("NewLaunchd with /bin/sh as launchctl = %v, %v", b, err)
	}
}

// TestLaunchdLaunchctlFailures drives the backend with a launchctl that answers badly.
func TestLaunchdLaunchctlFailures(t *testing.T) {
	ctx := context.Background()
	script := func(t *testing.T, body string) []string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "launchctl"), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{"PATH=" + dir}
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run scripted launchctls")
	}
	var fake *launchctltest.Fake // these launchctls are scripts, not the stand-in
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	t.Run("print fails", func(t *testing.T) {
		e := newLaunchdEnvWith(t, fake, script(t, "echo 'Operation not permitted' >&2; exit 1\n"))
		err := e.b.Arm(ctx, e.c, e.job(Wake, at))
		if err == nil || !strings.Contains(err.Error(), "launchctl print gui/501/"+LaunchdLabel(e.c.ID, Wake)+": exit status 1: Operation not permitted") {
			t.Fatalf("Arm: %v", err)
		}
		if fileExists(e.plistPath(LaunchdLabel(e.c.ID, Wake))) {
			t.Error("Arm wrote a plist although launchd could not be asked")
		}
	})
	t.Run("print garbage", func(t *testing.T) {
		e := newLaunchdEnvWith(t, fake, script(t, "echo 'gui/501/x = {'\n"))
		err := e.b.Arm(ctx, e.c, e.job(Wake, at))
		if err == nil || !strings.Contains(err.Error(), "line 1: the job description ends before its closing brace") {
			t.Fatalf("Arm: %v", err)
		}
	})
	t.Run("print another job", func(t *testing.T) {
		e := newLaunchdEnvWith(t, fake, script(t, "printf 'gui/501/other = {\\n}\\n'\n"))
		err := e.b.Arm(ctx, e.c, e.job(Wake, at))
		if err == nil || !strings.Contains(err.Error(), "describes gui/501/other instead") {
			t.Fatalf("Arm: %v", err)
		}
	})
	t.Run("no calendar", func(t *testing.T) {
		e := newLaunchdEnvWith(t, fake, script(t, `printf '%s = {\n\tstate = not running\n}\n' "$2"`+"\n"))
		if err := os.MkdirAll(e.b.o.AgentsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		wake := LaunchdLabel(e.c.ID, Wake)
		if err := os.WriteFile(e.plistPath(wake), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := e.b.Next(ctx, e.c.ID, Wake)
		if err == nil || !strings.Contains(err.Error(), "launchctl print gui/501/"+wake+" shows no calendar trigger") {
			t.Fatalf("Next: %v", err)
		}
	})
	t.Run("bootout fails", func(t *testing.T) {
		e := newLaunchdEnvWith(t, fake, script(t, `case $1 in
print) printf '%s = {\n\tstate = not running\n}\n' "$2";;
bootout) echo 'Boot-out failed: 1: Operation not permitted' >&2; exit 1;;
esac
`))
		err := e.b.Disarm(ctx, e.c.ID, Fallback)
		if err == nil || !strings.Contains(err.Error(), "exit status 1: Boot-out failed: 1: Operation not permitted") {
			t.Fatalf("Disarm: %v", err)
		}
	})
	t.Run("bootout in progress", func(t *testing.T) {
		// The job stays loaded although bootout said it was stopping it.
		e := newLaunchdEnvWith(t, fake, script(t, `case $1 in
print) printf '%s = {\n\tstate = not running\n}\n' "$2";;
bootout) echo 'Boot-out failed: 36: Operation now in progress' >&2; exit 36;;
esac
`))
		err := e.b.Disarm(ctx, e.c.ID, Fallback)
		if err == nil || !strings.Contains(err.Error(), "is still loaded after waiting") {
			t.Fatalf("Disarm: %v", err)
		}
	})
	t.Run("no GUI session, bootstrap answers 5", func(t *testing.T) {
		// psimaker/vaultsync#89: bootstrap from an SSH session with nobody logged in dies with a
		// bare 5. The service prints pass (113: not loaded), the domain print says there is none.
		e := newLaunchdEnvWith(t, fake, script(t, `case "$1 $2" in
"print gui/501") printf 'Bad request.\nCould not find domain for user gui: 501\n' >&2; exit 112;;
"print "*) printf 'Bad request.\nCould not find service "x" in domain for user gui: 501\n' >&2; exit 113;;
"print-disabled "*) printf 'disabled services = {\n}\n';;
"bootstrap "*) printf 'Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n' >&2; exit 5;;
esac
`))
		err := e.b.Arm(ctx, e.c, e.job(Wake, at))
		if !errors.Is(err, ErrNoSession) || !strings.Contains(err.Error(), "Bootstrap failed: 5: Input/output error") {
			t.Fatalf("Arm: %v", err)
		}
	})
	t.Run("bootstrap 5 for another reason", func(t *testing.T) {
		// Neither disabled nor logged out: the retries run out and the message says what to check.
		e := newLaunchdEnvWith(t, fake, script(t, `case "$1 $2" in
"print gui/501") printf 'gui/501 = {\n\ttype = login\n}\n';;
"print "*) printf 'Bad request.\nCould not find service "x" in domain for user gui: 501\n' >&2; exit 113;;
"print-disabled "*) printf 'disabled services = {\n\t"com.docker.helper" => enabled\n}\n';;
"bootstrap "*) printf 'Bootstrap failed: 5: Input/output error\n' >&2; exit 5;;
esac
`))
		err := e.b.Arm(ctx, e.c, e.job(Wake, at))
		if err == nil || errors.Is(err, ErrNoSession) || errors.Is(err, ErrDisabled) || !strings.Contains(err.Error(), "still refused after 4 attempts") {
			t.Fatalf("Arm: %v", err)
		}
	})
	t.Run("hangs", func(t *testing.T) {
		sleepBin, err := exec.LookPath("sleep")
		if err != nil {
			t.Skip("no sleep command")
		}
		e := newLaunchdEnvWith(t, fake, script(t, "exec "+sleepBin+" 60\n"))
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, _, err := e.b.Next(cctx, e.c.ID, Wake); err != nil {
			t.Fatalf("Next without a plist should not call launchctl: %v", err)
		}
		err = e.b.Arm(cctx, e.c, e.job(Wake, at))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Arm with a hanging launchctl: %v", err)
		}
	})
}
