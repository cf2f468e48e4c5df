package timer_test

// These tests run the systemd backend against a real, private systemd user manager
// (timer/systemdtest). The job they arm is this test binary itself: started with
// CRYOTEST_RECORD in its environment, it appends what it was started with (argv, environment,
// time) to that file and exits, so each test can check what systemd really ran.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// recordVar names the file the recorder appends to; it reaches the recorder only through the
// chamber's environment file, so a record also proves that systemd read that file.
const recordVar = "CRYOTEST_RECORD"

func TestMain(m *testing.M) {
	if out := os.Getenv(recordVar); out != "" {
		os.Exit(recordRun(out))
	}
	os.Exit(m.Run())
}

// run is one start of the recorder.
type run struct {
	Argv []string  `json:"argv"`
	Env  []string  `json:"env"`
	Time time.Time `json:"time"`
}

func recordRun(out string) int {
	data, err := json.Marshal(run{Argv: os.Args, Env: os.Environ(), Time: time.Now().UTC()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	defer f.Close()
	// One write per record: concurrent starts cannot interleave.
	if _, err := f.Write(append(data, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "recorder:", err)
		return 1
	}
	fmt.Println("recorder: ran", strings.Join(os.Args, " | "))
	return 0
}

func readRuns(t *testing.T, path string) []run {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var runs []run
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r run
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %s: %v", path, err)
		}
		runs = append(runs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return runs
}

// awkward values: everything systemd would otherwise expand, split or strip.
const (
	awkwardDirName = `chamber "q" 'a' \b $HOME ${HOME} 100% %h é ✓ ;# [x]*?`
	awkwardBinDir  = `bin dir 100% %n ünï ✓` // no quote, backslash or $: systemd refuses those in executables
)

var awkwardArgs = []string{
	"arg with  spaces ", `100% %h %% $HOME ${HOME} $$ $`, `"double" 'single'`, `back\slash \\ \" \n`,
	"ünïcödé ✓ 日本", "", ";", "#hash", "$HOME", "`date`",
}

var awkwardEnv = []string{
	"WEIRD_SPACES=  leading and trailing  ",
	`WEIRD_QUOTES=it's "quoted"`,
	`WEIRD_DOLLAR=$HOME ${HOME} $$ $`,
	"WEIRD_BACKTICK=`date` $(date)",
	`WEIRD_BACKSLASH=a\b\\c\ \"\`,
	"WEIRD_PERCENT=100% %h %%",
	"WEIRD_UNICODE=héllo wörld ✓ 日本",
	"WEIRD_HASH=# not a comment ; nor this",
	"WEIRD_EMPTY=",
	"WEIRD_EQUALS=a=b=c",
	"PATH=/usr/bin:/bin:/opt/with space",
}

type fixture struct {
	m    *systemdtest.Manager
	b    timer.Backend
	root string
	bin  string // a link to this test binary in a directory with an awkward name
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := systemdtest.Start(t)
	f := &fixture{m: m, root: t.TempDir()}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.root, awkwardBinDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.bin = filepath.Join(dir, "cryochamber")
	if err := os.Symlink(self, f.bin); err != nil {
		t.Fatal(err)
	}
	f.b = connect(t, m.Options())
	return f
}

func connect(t *testing.T, o timer.SystemdOptions) timer.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := timer.NewSystemd(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	t.Logf("connected: %v", b)
	return b
}

// chamber makes a chamber directory with an environment file and returns it with the file its
// recorder writes to.
func (f *fixture) chamber(t *testing.T, name string) (timer.Chamber, string) {
	t.Helper()
	dir := filepath.Join(f.root, name, awkwardDirName)
	if err := os.MkdirAll(filepath.Join(dir, ".cryo"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "record.jsonl")
	env, err := timer.FormatEnvFile(append([]string{recordVar + "=" + rec}, awkwardEnv...))
	if err != nil {
		t.Fatal(err)
	}
	c := timer.Chamber{ID: timer.ID(dir), Dir: dir, EnvFile: filepath.Join(dir, ".cryo", "env")}
	if err := os.WriteFile(c.EnvFile, env, 0o600); err != nil {
		t.Fatal(err)
	}
	return c, rec
}

func (f *fixture) argv(c timer.Chamber, verb string) []string {
	return append([]string{f.bin, verb, "--dir", c.Dir}, awkwardArgs...)
}

// soon is a whole second at least d from now.
func soon(d time.Duration) time.Time {
	return time.Now().Add(d).UTC().Truncate(time.Second).Add(time.Second)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitRuns waits (bounded) until the recorder has run n times.
func (f *fixture) waitRuns(t *testing.T, rec string, n int, timeout time.Duration) []run {
	t.Helper()
	var runs []run
	f.m.WaitFor(t, timeout, fmt.Sprintf("%d run(s) recorded in %s", n, rec), func() bool {
		runs = readRuns(t, rec)
		return len(runs) >= n
	})
	return runs
}

// checkRun compares what systemd started with what was armed.
func checkRun(t *testing.T, r run, argv []string, envFile string) {
	t.Helper()
	if !slices.Equal(r.Argv, argv) {
		t.Errorf("argv differs:\n got %q\nwant %q", r.Argv, argv)
	}
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := timer.ParseEnvFile(data)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range r.Env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, kv := range want {
		k, v, _ := strings.Cut(kv, "=")
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("environment: systemd gave %s=%q (set: %v), the env file and ParseEnvFile say %q", k, g, ok, v)
		}
	}
}

func TestSystemdArmFiresWithExactArgvAndEnv(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, rec := f.chamber(t, "fire")
	at := soon(3 * time.Second)
	j := timer.Job{Kind: timer.Wake, At: at, Argv: f.argv(c, "wake")}
	if err := f.b.Arm(ctx, c, j); err != nil {
		t.Fatalf("Arm: %v\n%s", err, f.m.Journal(t))
	}
	next, ok, err := f.b.Next(ctx, c.ID, timer.Wake)
	if err != nil || !ok || !next.Equal(at) {
		t.Fatalf("Next = %v, %v, %v; want %v", next, ok, err, at)
	}
	if _, ok, err := f.b.Next(ctx, c.ID, timer.Fallback); err != nil || ok {
		t.Fatalf("Next(fallback) of a chamber without one = ok %v, err %v; want not ok", ok, err)
	}
	runs := f.waitRuns(t, rec, 1, 30*time.Second)
	if len(runs) != 1 {
		t.Fatalf("ran %d times, want once", len(runs))
	}
	checkRun(t, runs[0], j.Argv, c.EnvFile)
	if runs[0].Time.Before(at) {
		t.Errorf("fired at %v, before its time %v", runs[0].Time, at)
	}
	t.Logf("armed for %v, ran at %v", at, runs[0].Time)
	if _, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || ok {
		t.Errorf("Next after the only elapse = ok %v, err %v; want not ok", ok, err)
	}
	// The timer is transient (no file); the boot unit that re-arms after a restart is enabled.
	if _, err := os.Lstat(filepath.Join(f.m.UnitDir, timer.SystemdTimerName(c.ID, timer.Wake))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a timer unit file was written (%v); timers are transient", err)
	}
	if _, err := os.Lstat(filepath.Join(f.m.UnitDir, "default.target.wants", timer.SystemdBootName(c.ID))); err != nil {
		t.Errorf("boot unit not enabled: %v", err)
	}
}

func TestSystemdDisarm(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	gone, goneRec := f.chamber(t, "disarmed")
	witness, witnessRec := f.chamber(t, "witness")
	at := soon(3 * time.Second)
	for _, c := range []timer.Chamber{gone, witness} {
		for _, k := range timer.Kinds {
			if err := f.b.Arm(ctx, c, timer.Job{Kind: k, At: at, Argv: f.argv(c, string(k))}); err != nil {
				t.Fatalf("Arm: %v", err)
			}
		}
	}
	for _, k := range timer.Kinds {
		if err := f.b.Disarm(ctx, gone.ID, k); err != nil {
			t.Fatalf("Disarm(%s): %v", k, err)
		}
		if err := f.b.Disarm(ctx, gone.ID, k); err != nil {
			t.Fatalf("Disarm(%s) again: %v", k, err)
		}
		if _, ok, err := f.b.Next(ctx, gone.ID, k); err != nil || ok {
			t.Fatalf("Next after Disarm = ok %v, err %v; want not ok", ok, err)
		}
	}
	for _, name := range []string{
		timer.SystemdServiceName(gone.ID, timer.Wake), timer.SystemdServiceName(gone.ID, timer.Fallback),
		timer.SystemdServiceName(gone.ID, timer.Alert), timer.SystemdBootName(gone.ID),
		filepath.Join("default.target.wants", timer.SystemdBootName(gone.ID)),
	} {
		if _, err := os.Lstat(filepath.Join(f.m.UnitDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Disarm (%v)", name, err)
		}
	}
	// The witness, armed for the same second, fires both of its timers; the disarmed chamber
	// must not have fired by then.
	f.waitRuns(t, witnessRec, 2, 30*time.Second)
	if runs := readRuns(t, goneRec); len(runs) != 0 {
		t.Fatalf("the disarmed timer fired %d times", len(runs))
	}
	if err := f.b.Disarm(ctx, timer.ID("/never/armed"), timer.Wake); err != nil {
		t.Errorf("Disarm of a chamber that never had timers: %v", err)
	}
}

func TestSystemdRearmReplacesTheTime(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, rec := f.chamber(t, "rearm")
	late := soon(time.Hour)
	if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: late, Argv: f.argv(c, "first")}); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(late) {
		t.Fatalf("Next = %v, %v, %v; want %v", next, ok, err, late)
	}
	at := soon(3 * time.Second)
	argv := f.argv(c, "second")
	if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: at, Argv: argv}); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(at) {
		t.Fatalf("Next after re-Arm = %v, %v, %v; want %v", next, ok, err, at)
	}
	runs := f.waitRuns(t, rec, 1, 30*time.Second)
	checkRun(t, runs[0], argv, c.EnvFile)
	if _, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || ok {
		t.Errorf("Next after the elapse = ok %v, err %v; the old time must be gone", ok, err)
	}
	// The loop of a plan: the timer fired, the session arms the next wake on the same unit.
	again := soon(3 * time.Second)
	if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: again, Argv: argv}); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(again) {
		t.Fatalf("Next after re-Arm of a fired timer = %v, %v, %v; want %v", next, ok, err, again)
	}
	runs = f.waitRuns(t, rec, 2, 30*time.Second)
	if len(runs) != 2 || runs[1].Time.Before(again) {
		t.Errorf("second run: %d runs, last at %v; want 2, not before %v", len(runs), runs[len(runs)-1].Time, again)
	}
}

// A reboot removes the transient timers; the boot unit runs the wake once at the next start of
// the manager (the chamber's wake then runs what fell due, or re-arms): here the timer's time
// passed while the manager was down, and the wake runs exactly once, after the restart.
func TestSystemdBootRunsTheWakeAfterReboot(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, rec := f.chamber(t, "reboot")
	at := soon(4 * time.Second)
	argv := f.argv(c, "wake")
	if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: at, Argv: argv},
		timer.Job{Kind: timer.Fallback, At: at.Add(time.Hour), Argv: f.argv(c, "fallback")}); err != nil {
		t.Fatal(err)
	}
	f.b.Close()
	f.m.Stop(t)
	// "Power off" until the timer's time has passed.
	for deadline := time.Now().Add(15 * time.Second); !time.Now().After(at.Add(time.Second)); {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not pass the timer's time")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if runs := readRuns(t, rec); len(runs) != 0 {
		t.Fatalf("fired while the manager was stopped: %v", runs)
	}
	f.m.Restart(t)
	runs := f.waitRuns(t, rec, 1, 30*time.Second)
	checkRun(t, runs[0], argv, c.EnvFile)
	if !runs[0].Time.After(at) {
		t.Errorf("ran at %v, want after the restart (past %v)", runs[0].Time, at)
	}
	b := connect(t, f.m.Options())
	for _, k := range []timer.Kind{timer.Wake, timer.Fallback} {
		if _, ok, err := b.Next(ctx, c.ID, k); err != nil || ok {
			t.Errorf("Next(%s) after the restart = ok %v, err %v; transient timers do not outlive the manager", k, ok, err)
		}
	}
	time.Sleep(2 * time.Second)
	if runs := readRuns(t, rec); len(runs) != 1 {
		t.Errorf("ran %d times after the restart, want once", len(runs))
	}
	// Still installed: ps finds the chamber by its files.
	got, err := b.Installed(ctx)
	if err != nil || len(got) != 1 || got[0].Dir != c.Dir || len(got[0].Kinds) != 0 {
		t.Errorf("Installed after the restart = %+v, %v; want the chamber, without timers", got, err)
	}
}

func TestSystemdWatchStartsTheWake(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, rec := f.chamber(t, "watch")
	inbox := filepath.Join(c.Dir, "messages", "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	argv := f.argv(c, "wake")
	if err := f.b.Watch(ctx, c, inbox, argv); err != nil {
		t.Fatalf("Watch: %v\n%s", err, f.m.Journal(t))
	}
	if err := f.b.Watch(ctx, c, inbox, argv); err != nil {
		t.Fatalf("Watch again: %v", err)
	}
	if runs := readRuns(t, rec); len(runs) != 0 {
		t.Fatalf("the wake ran before any message: %v", runs)
	}
	if err := os.WriteFile(filepath.Join(inbox, "msg-1.md"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := f.waitRuns(t, rec, 1, 30*time.Second)
	checkRun(t, runs[0], argv, c.EnvFile)

	if err := f.b.Unwatch(ctx, c.ID); err != nil {
		t.Fatalf("Unwatch: %v", err)
	}
	if err := f.b.Unwatch(ctx, c.ID); err != nil {
		t.Fatalf("Unwatch again: %v", err)
	}
	for _, name := range []string{timer.SystemdPathName(c.ID), timer.SystemdServiceName(c.ID, timer.Wake), timer.SystemdBootName(c.ID)} {
		if _, err := os.Lstat(filepath.Join(f.m.UnitDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Unwatch (%v)", name, err)
		}
	}
}

func TestSystemdWatchKeepsAnArmedWakeService(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "watch-armed")
	inbox := filepath.Join(c.Dir, "messages", "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "armed")}); err != nil {
		t.Fatal(err)
	}
	svc := filepath.Join(f.m.UnitDir, timer.SystemdServiceName(c.ID, timer.Wake))
	before, err := os.ReadFile(svc)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.b.Watch(ctx, c, inbox, f.argv(c, "watch")); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(svc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("Watch rewrote the armed wake service:\n%s\nbecame\n%s", before, after)
	}
	// Disarming the wake timer keeps the service the watcher starts; Unwatch then removes it.
	if err := f.b.Disarm(ctx, c.ID, timer.Wake); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(svc); err != nil {
		t.Errorf("Disarm removed the wake service the watcher still needs: %v", err)
	}
	if err := f.b.Unwatch(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(svc); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("wake service left behind after Disarm and Unwatch (%v)", err)
	}
}

func TestSystemdRunNow(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, rec := f.chamber(t, "runnow")
	if err := f.b.RunNow(ctx, c.ID); err == nil || !strings.Contains(err.Error(), "no such unit") {
		t.Fatalf("RunNow without units = %v, want a 'no such unit' error", err)
	}
	argv := f.argv(c, "wake")
	if err := f.b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: argv}); err != nil {
		t.Fatal(err)
	}
	if err := f.b.RunNow(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	runs := f.waitRuns(t, rec, 1, 30*time.Second)
	checkRun(t, runs[0], argv, c.EnvFile)
	// Running the service does not consume the timer.
	if _, ok, err := f.b.Next(ctx, c.ID, timer.Wake); err != nil || !ok {
		t.Errorf("Next after RunNow = ok %v, err %v; want the timer still armed", ok, err)
	}
}

func TestSystemdInstalled(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	if got, err := f.b.Installed(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Installed on an empty unit directory = %v, %v", got, err)
	}
	a, _ := f.chamber(t, "a")
	b, _ := f.chamber(t, "b")
	for _, k := range timer.Kinds {
		if err := f.b.Arm(ctx, a, timer.Job{Kind: k, At: soon(time.Hour), Argv: f.argv(a, string(k))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.b.Watch(ctx, b, filepath.Join(b.Dir, "inbox"), f.argv(b, "wake")); err != nil {
		t.Fatal(err)
	}
	// Not ours, or not a chamber's: ignored.
	for _, name := range []string{"other.service", "cryo-.timer", "cryo-x-12345678-wake.timer.bak"} {
		if err := os.WriteFile(filepath.Join(f.m.UnitDir, name), []byte("[Unit]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.b.Installed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []timer.Installed{
		{ID: a.ID, Dir: a.Dir, Kinds: timer.Kinds},
		{ID: b.ID, Dir: b.Dir, Watch: true},
	}
	slices.SortFunc(want, func(x, y timer.Installed) int { return strings.Compare(x.ID, y.ID) })
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("Installed =\n %+v\nwant\n %+v", got, want)
	}
}

func TestSystemdArmRefusesBadJobs(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	c, _ := f.chamber(t, "bad")
	tests := []struct {
		name string
		c    timer.Chamber
		j    timer.Job
		want string
	}{
		{"year", c, timer.Job{Kind: timer.Wake, At: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), Argv: f.argv(c, "wake")}, "1970 to 2199"},
		{"kind", c, timer.Job{Kind: "other", At: soon(time.Hour), Argv: f.argv(c, "wake")}, `unknown timer kind "other"`},
		{"newline", c, timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: []string{f.bin, "a\nExecStartPre=/bin/evil"}}, "line break"},
		{"relative", c, timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: []string{"cryochamber", "wake"}}, "not an absolute path"},
		{"id", timer.Chamber{ID: "../etc", EnvFile: c.EnvFile}, timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "wake")}, `invalid chamber id "../etc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.b.Arm(ctx, tt.c, tt.j)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Arm = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	ents, err := os.ReadDir(f.m.UnitDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("refused jobs left files in the unit directory: %v", ents)
	}
}

// A unit directory the manager does not read is an error at Arm, not a timer that never fires.
func TestSystemdArmOutsideTheManagersUnitDir(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	o := f.m.Options()
	o.UnitDir = filepath.Join(f.root, "elsewhere", "systemd", "user")
	b := connect(t, o)
	c, _ := f.chamber(t, "elsewhere")
	err := b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: soon(time.Hour), Argv: f.argv(c, "wake")})
	if err == nil || !strings.Contains(err.Error(), "is "+o.UnitDir+" the user manager's unit directory?") {
		t.Fatalf("Arm = %v, want an error naming the unit directory", err)
	}
}

func TestSystemdConnectsThroughSessionBusOrPrivateSocket(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	o := f.m.Options()
	o.BusAddress = "unix:path=" + filepath.Join(f.root, "no-bus-here") + ";tcp:host=127.0.0.1,port=1"
	b := connect(t, o)
	if s := fmt.Sprint(b); !strings.Contains(s, f.m.RuntimeDir) {
		t.Errorf("connected via %q, want one of the runtime directory's sockets", s)
	}
	if _, err := b.Installed(ctx); err != nil {
		t.Fatal(err)
	}
	o.BusAddress = ""
	if err := os.Remove(filepath.Join(f.m.RuntimeDir, "bus")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	b = connect(t, o)
	if s := fmt.Sprint(b); !strings.HasSuffix(s, "/systemd/private") {
		t.Errorf("without a session bus, connected via %q, want the private socket", s)
	}
	c, _ := f.chamber(t, "private")
	at := soon(time.Hour)
	if err := b.Arm(ctx, c, timer.Job{Kind: timer.Wake, At: at, Argv: f.argv(c, "wake")}); err != nil {
		t.Fatal(err)
	}
	if next, ok, err := b.Next(ctx, c.ID, timer.Wake); err != nil || !ok || !next.Equal(at) {
		t.Errorf("Next via the private socket = %v, %v, %v; want %v", next, ok, err, at)
	}
}

func TestSystemdWarnings(t *testing.T) {
	f := newFixture(t)
	ctx := ctxT(t)
	o := f.m.Options()
	o.User = "alice"
	o.LingerFile = filepath.Join(f.root, "linger", "alice")
	b := connect(t, o)
	w := b.Warnings(ctx)
	if len(w) != 1 || !strings.Contains(w[0], "lingering is off for user alice") || !strings.Contains(w[0], "loginctl enable-linger alice") {
		t.Errorf("Warnings without a linger file = %q", w)
	}
	if err := os.MkdirAll(filepath.Dir(o.LingerFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.LingerFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if w := b.Warnings(ctx); len(w) != 0 {
		t.Errorf("Warnings with lingering on = %q", w)
	}
}

// TestSystemdUnavailable needs no manager: a runtime directory where none runs.
func TestSystemdUnavailable(t *testing.T) {
	rt := t.TempDir()
	tests := []struct {
		name string
		o    timer.SystemdOptions
		want []string
	}{
		{"empty runtime dir", timer.SystemdOptions{UnitDir: "/nonexistent/units", RuntimeDir: rt, User: "bob"},
			[]string{filepath.Join(rt, "bus") + " (no socket)", filepath.Join(rt, "systemd", "private"), "systemctl --user status", "for bob"}},
		{"bus address", timer.SystemdOptions{UnitDir: "/nonexistent/units", BusAddress: "unix:path=" + filepath.Join(rt, "gone") + ";autolaunch:"},
			[]string{filepath.Join(rt, "gone"), "autolaunch: (skipped: only unix: addresses are used)"}},
		{"nothing", timer.SystemdOptions{UnitDir: "/nonexistent/units"}, []string{"neither a session bus address nor a runtime directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b, err := timer.NewSystemd(ctx, tt.o)
			if err == nil {
				b.Close()
				t.Fatal("NewSystemd succeeded without a manager")
			}
			if !errors.Is(err, timer.ErrUnavailable) {
				t.Errorf("error does not wrap ErrUnavailable: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	_, err := timer.NewSystemd(context.Background(), timer.SystemdOptions{UnitDir: "units", RuntimeDir: rt})
	if err == nil || errors.Is(err, timer.ErrUnavailable) || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("relative unit dir: %v", err)
	}
}
