package main

// CLI scripts: each testdata/script/*.txtar is a testscript
// (github.com/rogpeppe/go-internal/testscript) run against the cryochamber binary that TestMain
// builds. Files of the archive are written to $WORK; a file that starts with "#!" is made
// executable. HOME is $WORK/.home, TZ is UTC, and the binary is first on PATH as `cryochamber`.
//
// testscript's own commands (exec, stdout, stderr, grep, cmp, cp, env, cd, mkdir, rm, chmod,
// wait, skip, ...) work as documented there: `grep` and `cmp` read one file and fail when it is
// missing, so `! grep RE FILE` on a misspelt FILE fails instead of passing. `! exists` is
// refused (a misspelt directory would make it pass): use `absent`. Exact output is compared with
// a file of the archive by `cmp stdout FILE` (or `cmpenv`, which expands $WORK in FILE first);
// `go test -run TestScripts -update .` rewrites the files that `cmp` compares with. The domain
// commands:
//
//	cryo ARGS...                run the cryochamber binary (bounded by 90 s); `! cryo` must fail
//	status N                    the last `cryo` exited with status N
//	manager                     start a private systemd user manager for the script
//	                            (timer/systemdtest; sets HOME, XDG_RUNTIME_DIR, XDG_CONFIG_HOME, UNITDIR)
//	stop-manager / restart-manager   stop it (a shutdown), start a new one on the same HOME (a boot)
//	units N                     N cryo-* unit files are installed
//	timers N                    the manager reports N active cryo-* timers
//	smtpd                       start a real SMTP server (aiosmtpd); sets SMTP_PORT and MAILDIR.
//	                            Lines that need it start with [smtp]: without aiosmtpd only
//	                            they are left out (a skipped subtest "smtp"; a failure under
//	                            CRYO_REQUIRE_E2E)
//	webhookd                    start an HTTP server that records each request as $WORK/webhook/<n>.txt;
//	                            sets WEBHOOK_URL
//	files N DIR                 DIR holds N regular, non-hidden files (DIR must exist)
//	grepdir [-count=N] RE DIR   the regular files directly in DIR, concatenated, match RE (DIR must exist)
//	absent PATH...              PATH does not exist, but its parent directory does
//	json FILE KEY VALUE         a top-level key of a JSON file (timer.json) has that value
//	dead PIDFILE                the process whose PID is in PIDFILE is gone (or a zombie)
//	wait-phase DIR PHASE [SESSION] [TIMEOUT]   poll DIR/timer.json until that phase (and session)
//	wait-file PATH [TIMEOUT]    poll until PATH exists
//	wait-files N DIR [TIMEOUT]  poll until DIR holds at least N regular files
//	wait-grep RE FILE [TIMEOUT] poll until FILE exists and matches RE
//	expand FILE                 replace $VARS in FILE (cryo.toml needs the ports)
//	setenv-file VAR FILE        set VAR to the trimmed content of FILE
//	date VAR OFFSET [LAYOUT]    set VAR to now+OFFSET in UTC (RFC 3339 by default)
//	wait-idle [TIMEOUT]         wait until the manager has no cryo-* job queued and no cryo-*
//	                            service (or triggered path unit) at work: the positive event
//	                            to wait for before asserting that nothing else ran
//	wait-time TIME OFFSET       wait until the clock is past TIME (RFC 3339) + OFFSET
//
// Run one script with: go test -run 'TestScripts/<name>$' . (-v shows every command's output).
// TestScriptHarness proves that the negative checks fail on a missing path.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

func TestScripts(t *testing.T) {
	runScripts(t, scriptParams("testdata/script", false))
}

// TestScriptsWithoutSMTP runs alert scenarios as on a machine without an SMTP server: only their
// email part is left out ([smtp] lines); their webhook and outbox checks still run, and [!smtp]
// lines check that the outbox records the failed email.
func TestScriptsWithoutSMTP(t *testing.T) {
	p := scriptParams("testdata/script", true)
	// alert-missed passes this way too, but waits 45 s for the dead-man timer; these two cover the
	// alerts of start (hung, crashed) and of the fallback command (crashed).
	p.Dir, p.Files = "", []string{"testdata/script/alert-hung.txtar", "testdata/script/alert-crashed.txtar"}
	runScripts(t, p)
}

func runScripts(t *testing.T, p testscript.Params) {
	if d, ok := t.Deadline(); ok {
		p.Deadline = d
	}
	testscript.RunT(scriptT{t}, p)
}

// scriptT hands testscript the *testing.T of each script, so that its commands can start a
// manager on it and record a skipped part as a subtest (testscript.Run hides it).
type scriptT struct{ *testing.T }

func (t scriptT) Run(name string, f func(testscript.T)) {
	t.T.Run(name, func(t *testing.T) { f(scriptT{t}) })
}

func (scriptT) Verbose() bool { return testing.Verbose() }

// scriptParams are the parameters of every script run (the harness test uses them too).
// noSMTP runs the scripts as if this machine had no SMTP server.
func scriptParams(dir string, noSMTP bool) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Setup: func(env *testscript.Env) error {
			if err := setupScript(dir, env); err != nil {
				return err
			}
			env.Values[stateKey{}].(*scriptState).noSMTP = noSMTP
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "smtp": // a real SMTP server runs for the script's smtpd
				return !noSMTP && aiosmtpdMissing() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds:                scriptCmds,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *update, // cmp (not cmpenv) files in the archive are rewritten
	}
}

// scriptState is what the domain commands of one script share.
type scriptState struct {
	t       *testing.T // the script's own test (for systemdtest); nil in the harness test
	work    string
	mgr     *systemdtest.Manager
	status  int // exit status of the last `cryo`
	ranCryo bool
	noSMTP  bool // act as if aiosmtpd were not installed (TestScriptsWithoutSMTP)
}

type stateKey struct{}

func scriptStateOf(ts *testscript.TestScript) *scriptState {
	return ts.Value(stateKey{}).(*scriptState)
}

// cryoTimeout bounds one `cryo` command: a hung command fails the script, with its output.
const cryoTimeout = 90 * time.Second

// forbidden are script lines that would pass on a misspelt path, and what to write instead.
var forbidden = []struct {
	re  *regexp.Regexp
	use string
}{
	{regexp.MustCompile(`^\s*!\s+exists\b`), "`absent PATH` (it also checks that the parent directory exists)"},
}

// lintScript refuses script lines that would pass on a misspelt path.
func lintScript(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			break // the files of the archive
		}
		for _, f := range forbidden {
			if f.re.MatchString(line) {
				return fmt.Errorf("%s:%d: %q passes when the path is misspelt; use %s", file, i+1, strings.TrimSpace(line), f.use)
			}
		}
	}
	return nil
}

func setupScript(dir string, env *testscript.Env) error {
	s := &scriptState{work: env.WorkDir, status: -1}
	if st, ok := env.T().(scriptT); ok {
		s.t = st.T
	}
	env.Values[stateKey{}] = s

	// Refuse the forms that pass vacuously on a misspelt path. testscript names the work
	// directory script-<name> after the file <name>.txtar.
	name := strings.TrimPrefix(filepath.Base(env.WorkDir), "script-")
	if err := lintScript(filepath.Join(dir, name+".txtar")); err != nil {
		return err
	}
	home := filepath.Join(env.WorkDir, ".home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	env.Setenv("HOME", home)
	env.Setenv("PATH", fixture.BinDir()+string(filepath.ListSeparator)+os.Getenv("PATH"))
	env.Setenv("TZ", "UTC")
	env.Setenv("LANG", "C.UTF-8")
	// Scripts (agents) are made executable.
	return filepath.WalkDir(env.WorkDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		head := make([]byte, 2)
		n, _ := io.ReadFull(f, head)
		f.Close()
		if n == 2 && string(head) == "#!" {
			return os.Chmod(p, 0o755)
		}
		return nil
	})
}

var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"cryo":            cmdCryo,
	"status":          cmdStatus,
	"manager":         cmdManager,
	"stop-manager":    cmdStopManager,
	"restart-manager": cmdRestartManager,
	"units":           cmdUnits,
	"timers":          cmdTimers,
	"smtpd":           cmdSMTPD,
	"webhookd":        cmdWebhookd,
	"files":           cmdFiles,
	"grepdir":         cmdGrepdir,
	"absent":          cmdAbsent,
	"json":            cmdJSON,
	"dead":            cmdDead,
	"wait-phase":      cmdWaitPhase,
	"wait-file":       cmdWaitFile,
	"wait-files":      cmdWaitFiles,
	"wait-grep":       cmdWaitGrep,
	"expand":          cmdExpand,
	"setenv-file":     cmdSetenvFile,
	"date":            cmdDate,
	"wait-idle":       cmdWaitIdle,
	"wait-time":       cmdWaitTime,
}

func usage(ts *testscript.TestScript, ok bool, text string) {
	if !ok {
		ts.Fatalf("usage: %s", text)
	}
}

func noNeg(ts *testscript.TestScript, neg bool, name string) {
	if neg {
		ts.Fatalf("unsupported: ! %s", name)
	}
}

// check fails the script unless ok (or, negated, unless !ok); what says what was expected.
func check(ts *testscript.TestScript, neg, ok bool, format string, args ...any) {
	if ok == neg {
		if neg {
			ts.Fatalf("unexpectedly: "+format, args...)
		}
		ts.Fatalf("expected: "+format, args...)
	}
}

func atoi(ts *testscript.TestScript, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		ts.Fatalf("%q is not a number", s)
	}
	return n
}

// cmdCryo runs the binary under timeout(1), which kills its whole process group after
// cryoTimeout, and records the exit status for `status`.
func cmdCryo(ts *testscript.TestScript, neg bool, args []string) {
	s := scriptStateOf(ts)
	secs := strconv.Itoa(int(cryoTimeout / time.Second))
	start := time.Now()
	err := ts.Exec("timeout", append([]string{"--kill-after=5", secs, fixture.Binary()}, args...)...)
	s.ranCryo, s.status = true, 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		s.status = ee.ExitCode() // 128+N when cryochamber died of signal N
		if (s.status == 124 || s.status == 137) && time.Since(start) >= cryoTimeout {
			ts.Fatalf("cryo %s did not finish within %s", strings.Join(args, " "), cryoTimeout)
		}
	case err != nil:
		ts.Fatalf("cryo: %v", err)
	}
	if neg && s.status == 0 {
		ts.Fatalf("cryo %s succeeded, want failure", strings.Join(args, " "))
	}
	if !neg && s.status != 0 {
		ts.Fatalf("cryo %s exited with status %d", strings.Join(args, " "), s.status)
	}
}

func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	usage(ts, len(args) == 1, "status N")
	s := scriptStateOf(ts)
	if !s.ranCryo {
		ts.Fatalf("status: no cryo command ran yet")
	}
	n := atoi(ts, args[0])
	check(ts, neg, s.status == n, "exit status %d (got %d)", n, s.status)
}

func needManager(ts *testscript.TestScript) *systemdtest.Manager {
	s := scriptStateOf(ts)
	if s.mgr == nil {
		ts.Fatalf("this command needs `manager` first")
	}
	return s.mgr
}

func cmdManager(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "manager")
	usage(ts, len(args) == 0, "manager")
	s := scriptStateOf(ts)
	if s.t == nil {
		ts.Fatalf("manager: not in TestScripts (the harness test runs no manager)")
	}
	if s.mgr != nil {
		ts.Fatalf("manager: already started")
	}
	m := systemdtest.Start(s.t)
	s.mgr = m
	// Stop it before testscript removes $WORK, and show its journal if the script failed.
	ts.Defer(func() {
		if s.t.Failed() {
			ts.Logf("manager journal (tail):\n%s", fixture.Tail(m.Journal(s.t), 6000))
		}
		m.Stop(s.t)
	})
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if k != "PATH" {
			ts.Setenv(k, v)
		}
	}
	ts.Setenv("UNITDIR", m.UnitDir)
}

func cmdStopManager(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "stop-manager")
	needManager(ts).Stop(scriptStateOf(ts).t)
}

func cmdRestartManager(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "restart-manager")
	needManager(ts).Restart(scriptStateOf(ts).t)
}

func cmdUnits(ts *testscript.TestScript, neg bool, args []string) {
	usage(ts, len(args) == 1, "units N")
	m := needManager(ts)
	n := atoi(ts, args[0])
	got := fixture.UnitFiles(scriptStateOf(ts).t, m, "cryo-")
	check(ts, neg, len(got) == n, "%d cryo-* unit files (got %d: %v)", n, len(got), got)
}

func cmdTimers(ts *testscript.TestScript, neg bool, args []string) {
	usage(ts, len(args) == 1, "timers N")
	m := needManager(ts)
	n := atoi(ts, args[0])
	got := fixture.Timers(scriptStateOf(ts).t, m, "cryo-*", false)
	check(ts, neg, len(got) == n, "%d active cryo-* timers (got %d: %v)", n, len(got), got)
}

// regularFiles lists the regular, non-hidden files directly in dir, which must exist.
func regularFiles(ts *testscript.TestScript, dir string) []string {
	ents, err := os.ReadDir(ts.MkAbs(dir))
	if err != nil {
		ts.Fatalf("%v", err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

func cmdFiles(ts *testscript.TestScript, neg bool, args []string) {
	usage(ts, len(args) == 2, "files N DIR")
	n := atoi(ts, args[0])
	names := regularFiles(ts, args[1])
	check(ts, neg, len(names) == n, "%d files in %s (got %d: %v)", n, args[1], len(names), names)
}

func cmdGrepdir(ts *testscript.TestScript, neg bool, args []string) {
	count := -1
	if len(args) > 0 && strings.HasPrefix(args[0], "-count=") {
		count = atoi(ts, strings.TrimPrefix(args[0], "-count="))
		if neg || count < 1 {
			ts.Fatalf("grepdir: -count=N needs N >= 1 and no !; for none, use ! grepdir")
		}
		args = args[1:]
	}
	usage(ts, len(args) == 2, "grepdir [-count=N] RE DIR")
	re, err := regexp.Compile("(?m)" + args[0])
	ts.Check(err)
	var all []byte
	for _, name := range regularFiles(ts, args[1]) {
		b, err := os.ReadFile(filepath.Join(ts.MkAbs(args[1]), name))
		ts.Check(err)
		all = append(all, b...)
	}
	got := len(re.FindAll(all, -1))
	if got > 0 == neg || (count > 0 && got != count) {
		ts.Logf("[%s]\n%s", args[1], all)
	}
	if count > 0 {
		check(ts, false, got == count, "%d matches of %#q in %s (got %d)", count, args[0], args[1], got)
		return
	}
	check(ts, neg, got > 0, "a match of %#q in the files of %s", args[0], args[1])
}

func cmdAbsent(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "absent (use exists)")
	usage(ts, len(args) > 0, "absent PATH...")
	for _, p := range args {
		abs := ts.MkAbs(p)
		if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
			ts.Fatalf("absent %s: its directory %s does not exist (a misspelt path?)", p, filepath.Dir(abs))
		}
		if _, err := os.Lstat(abs); err == nil {
			ts.Fatalf("%s exists", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			ts.Fatalf("%v", err)
		}
	}
}

func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	usage(ts, len(args) == 3, "json FILE KEY VALUE")
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		ts.Fatalf("%s: %v", args[0], err)
	}
	got := "<absent>"
	if v, ok := m[args[1]]; ok {
		got = fmt.Sprint(v)
		if v == nil {
			got = "null"
		}
	}
	check(ts, neg, got == args[2], "%s.%s = %s (got %s)", args[0], args[1], args[2], got)
}

func cmdDead(ts *testscript.TestScript, neg bool, args []string) {
	usage(ts, len(args) == 1, "dead PIDFILE")
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		ts.Fatalf("bad pid in %s", args[0])
	}
	// A killed process disappears once its parent reaps it: allow a few seconds.
	deadline := time.Now().Add(5 * time.Second)
	for fixture.ProcessLives(pid) != neg && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	check(ts, neg, !fixture.ProcessLives(pid), "process %d (from %s) is gone", pid, args[0])
}

// pollUntil polls cond until it holds or timeout passes; then fails with what().
func pollUntil(ts *testscript.TestScript, timeout time.Duration, cond func() bool, what func() string) {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			ts.Fatalf("%s", what())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func duration(ts *testscript.TestScript, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		ts.Fatalf("%v", err)
	}
	return d
}

func cmdWaitPhase(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "wait-phase")
	usage(ts, len(args) >= 2 && len(args) <= 4, "wait-phase DIR PHASE [SESSION] [TIMEOUT]")
	phase, session, timeout := args[1], 0, 60*time.Second
	for _, a := range args[2:] {
		if n, err := strconv.Atoi(a); err == nil {
			session = n
		} else {
			timeout = duration(ts, a)
		}
	}
	state := filepath.Join(ts.MkAbs(args[0]), "timer.json")
	var data []byte
	pollUntil(ts, timeout, func() bool {
		var st struct {
			Phase   string `json:"phase"`
			Session int    `json:"session"`
		}
		var err error
		data, err = os.ReadFile(state)
		return err == nil && json.Unmarshal(data, &st) == nil && st.Phase == phase && st.Session >= session
	}, func() string {
		return fmt.Sprintf("timer.json did not reach phase %s session %d within %s: %s", phase, session, timeout, data)
	})
}

func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "wait-file")
	usage(ts, len(args) == 1 || len(args) == 2, "wait-file PATH [TIMEOUT]")
	timeout := 60 * time.Second
	if len(args) == 2 {
		timeout = duration(ts, args[1])
	}
	pollUntil(ts, timeout, func() bool {
		_, err := os.Stat(ts.MkAbs(args[0]))
		return err == nil
	}, func() string { return fmt.Sprintf("%s did not appear within %s", args[0], timeout) })
}

func cmdWaitFiles(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "wait-files")
	usage(ts, len(args) == 2 || len(args) == 3, "wait-files N DIR [TIMEOUT]")
	n := atoi(ts, args[0])
	timeout := 60 * time.Second
	if len(args) == 3 {
		timeout = duration(ts, args[2])
	}
	count := 0
	pollUntil(ts, timeout, func() bool {
		ents, _ := os.ReadDir(ts.MkAbs(args[1]))
		count = 0
		for _, e := range ents {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				count++
			}
		}
		return count >= n
	}, func() string {
		return fmt.Sprintf("%s did not hold %d files within %s (has %d)", args[1], n, timeout, count)
	})
}

func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "wait-grep")
	usage(ts, len(args) == 2 || len(args) == 3, "wait-grep RE FILE [TIMEOUT]")
	re, err := regexp.Compile("(?m)" + args[0])
	ts.Check(err)
	timeout := 60 * time.Second
	if len(args) == 3 {
		timeout = duration(ts, args[2])
	}
	pollUntil(ts, timeout, func() bool {
		data, err := os.ReadFile(ts.MkAbs(args[1]))
		return err == nil && re.Match(data)
	}, func() string { return fmt.Sprintf("%s did not match %#q within %s", args[1], args[0], timeout) })
}

func cmdExpand(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "expand")
	usage(ts, len(args) == 1, "expand FILE")
	p := ts.MkAbs(args[0])
	data, err := os.ReadFile(p)
	ts.Check(err)
	ts.Check(os.WriteFile(p, []byte(os.Expand(string(data), ts.Getenv)), 0o644))
}

func cmdSetenvFile(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "setenv-file")
	usage(ts, len(args) == 2, "setenv-file VAR FILE")
	data, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	ts.Setenv(args[0], strings.TrimSpace(string(data)))
}

func cmdDate(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "date")
	usage(ts, len(args) == 2 || len(args) == 3, "date VAR OFFSET [LAYOUT]")
	d := duration(ts, strings.TrimPrefix(args[1], "+"))
	layout := time.RFC3339
	if len(args) == 3 {
		layout = args[2]
	}
	ts.Setenv(args[0], time.Now().UTC().Add(d).Format(layout))
}

// cmdWaitIdle waits for the positive event that comes before asserting that nothing else ran:
// the manager has no cryo-* job queued and no cryo-* service or triggered path unit at work.
func cmdWaitIdle(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "wait-idle")
	usage(ts, len(args) <= 1, "wait-idle [TIMEOUT]")
	timeout := 60 * time.Second
	if len(args) == 1 {
		timeout = duration(ts, args[0])
	}
	needManager(ts).WaitIdle(scriptStateOf(ts).t, timeout, "cryo-*")
}

// cmdWaitTime waits until the clock has passed TIME (RFC 3339) plus OFFSET: for a script that
// needs a deadline behind it (the machine stays off past a WAKE), never to let things settle.
func cmdWaitTime(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "wait-time")
	usage(ts, len(args) == 2, "wait-time TIME OFFSET")
	at, err := time.Parse(time.RFC3339, args[0])
	ts.Check(err)
	until := at.Add(duration(ts, strings.TrimPrefix(args[1], "+")))
	if d := time.Until(until); d > 5*time.Minute {
		ts.Fatalf("wait-time: %s is %s away", until.Format(time.RFC3339), d)
	} else if d > 0 {
		time.Sleep(d)
	}
}

var (
	aiosmtpdOnce sync.Once
	aiosmtpdErr  error
)

// aiosmtpdMissing says why Debian's aiosmtpd cannot run here, or nil (asked once).
func aiosmtpdMissing() error {
	aiosmtpdOnce.Do(func() { aiosmtpdErr = mailtest.SMTPMissing() })
	return aiosmtpdErr
}

// cmdSMTPD runs Debian's aiosmtpd as a real SMTP server storing mail in $WORK/maildir. Where it
// is missing, only the email part of the script is left out: it is recorded as the skipped
// subtest "smtp" (a failure under CRYO_REQUIRE_E2E), SMTP_PORT names a closed port (so the
// email alert fails and says so), and the script's [smtp] lines do not run.
func cmdSMTPD(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "smtpd")
	s := scriptStateOf(ts)
	if why := aiosmtpdMissing(); why != nil || s.noSMTP {
		// A closed port and an empty Maildir: the email alert fails and says so.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		ts.Check(err)
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if s.noSMTP {
			ts.Logf("smtpd: acting as a machine without an SMTP server: the [smtp] lines do not run")
		} else {
			e2e.SkipPart(s.t, "smtp", "no real SMTP server, so the email part of this script does not run: %v", why)
		}
		ts.Setenv("SMTP_PORT", strconv.Itoa(port))
		ts.Setenv("MAILDIR", filepath.Join(s.work, "maildir"))
		return
	}
	smtp := mailtest.StartSMTP(s.t) // stopped when the script ends
	ts.Setenv("SMTP_PORT", strconv.Itoa(smtp.Port))
	ts.Setenv("MAILDIR", smtp.Maildir)
}

// cmdWebhookd records every request (method, path, headers, body) as $WORK/webhook/<n>.txt.
func cmdWebhookd(ts *testscript.TestScript, neg bool, args []string) {
	noNeg(ts, neg, "webhookd")
	dir := filepath.Join(scriptStateOf(ts).work, "webhook")
	ts.Check(os.MkdirAll(dir, 0o755))
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.Path)
		for k, v := range r.Header {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(v, ", "))
		}
		b.WriteString("\n")
		b.Write(body)
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.txt", k)), b.Bytes(), 0o644)
		w.WriteHeader(http.StatusNoContent)
	}))
	ts.Defer(srv.Close)
	ts.Setenv("WEBHOOK_URL", srv.URL+"/hook")
}
