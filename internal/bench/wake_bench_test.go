package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// BenchmarkWake runs whole `cryochamber wake --now` processes against a private user manager.
// The agent prints its markers and exits at once, so what is measured is cryochamber's own
// cost: start, load, log (with fsync), agent, validate, arm both timers over D-Bus, read them
// back, save. It also times `cryochamber --version` (process start alone), and traces a few
// wakes with strace to show where the time goes.
func BenchmarkWake(b *testing.B) {
	needBinary(b)
	quietDisk()
	m := systemdtest.Start(b)
	env := managerEnv(m)
	root := b.TempDir()
	dir := filepath.Join(root, "chamber")
	chamber(b, dir, quickAgent, "")
	mustRun(b, env, dir, bin, "start", filepath.Join(dir, "plan.md"))
	// The same wake without the inbox watcher (watch_inbox = false): what the watcher costs.
	quiet := filepath.Join(root, "no-watch")
	chamber(b, quiet, quickAgent, "watch_inbox = false\n")
	mustRun(b, env, quiet, bin, "start", filepath.Join(quiet, "plan.md"))

	// Paired rounds (paired_bench_test.go): a wake, the same without the watcher, --version and
	// a daemon-reload in the same manager take turns in every round; each ratio is per round.
	n := reps(b, 31)
	b.ResetTimer()
	r := pairedRounds(n, []string{"wake", "no-watch", "version", "reload"},
		func() time.Duration { return mustRun(b, env, dir, bin, "wake", "--now", "--dir", dir).wall },
		func() time.Duration { return mustRun(b, env, quiet, bin, "wake", "--now", "--dir", quiet).wall },
		func() time.Duration { return mustRun(b, env, dir, bin, "--version").wall },
		func() time.Duration { t0 := time.Now(); m.Systemctl(b, "daemon-reload"); return time.Since(t0) },
	)
	b.StopTimer()
	const cWake, cNoWatch, cVersion, cReload = 0, 1, 2, 3
	var peak int64
	for i := 0; i < 3; i++ {
		peak = max(peak, mustRunRSS(b, env, dir, bin, "wake", "--now", "--dir", dir).maxRSS)
	}
	med, mq, reload := r.median(cWake), r.median(cNoWatch), r.median(cReload)
	b.ReportMetric(float64(med)/1e6, "ms-median")
	record(groupWake, "`cryochamber wake --now` (whole process, private user manager)", "agent prints its markers and exits; watch_inbox = true (default)",
		fmt.Sprintf("%s (p10 %s, p90 %s, n=%d), peak RSS %s", ms(med), ms(quantile(r.walls[cWake], 0.1)), ms(quantile(r.walls[cWake], 0.9)), n, mib(peak)),
		"", nil)
	record(groupWake, "`cryochamber wake --now` (whole process, private user manager)", "the same, watch_inbox = false",
		fmt.Sprintf("%s (p10 %s, p90 %s, n=%d)", ms(mq), ms(quantile(r.walls[cNoWatch], 0.1)), ms(quantile(r.walls[cNoWatch], 0.9)), n), "", nil)
	vr := r.ratio(cVersion, cReload)
	recordPaired(groupWake, "`cryochamber --version` (process start and exit alone) / one `daemon-reload`", "",
		fmt.Sprintf("%.2fx (%s against %s)", vr.med, ms(r.median(cVersion)), ms(reload)), vr, "", nil)
	record(groupWake, "`systemctl --user daemon-reload` (what one unit reload costs this manager)", "",
		fmt.Sprintf("%s (n=%d)", ms(reload), n), "", nil)
	wr := r.ratio(cWake, cReload)
	recordPaired(groupWake, "`cryochamber wake --now` / one `daemon-reload` in the same manager", "watch_inbox = true",
		fmt.Sprintf("%.2fx (%s against %s)", wr.med, ms(med), ms(reload)), wr, "≤ 0.3x", ok(wr.med <= 0.3))
	nw := r.ratio(cNoWatch, cReload)
	recordPaired(groupWake, "`cryochamber wake --now` / one `daemon-reload` in the same manager", "watch_inbox = false",
		fmt.Sprintf("%.2fx (%s against %s)", nw.med, ms(mq), ms(reload)), nw, "", nil)
	b.ReportMetric(wr.med, "wake/reload")
	if d, names := timeGenerators(b, reps(b, 5)); len(names) > 0 {
		record(groupWake, "the user generators every reload runs, run alone one after another", strings.Join(names, ", "),
			fmt.Sprintf("median %s (n=%d)", ms(d), reps(b, 5)), "", nil)
	}

	if _, err := exec.LookPath("strace"); err != nil {
		record(groupPhase, "wake phases (strace)", "", "skipped: strace is not installed", "", nil)
		return
	}
	traces := reps(b, 7)
	var runs []map[string]time.Duration
	var order []string
	var traced []time.Duration
	var syncs []time.Duration // counts, kept as durations for median()
	for i := 0; i < traces; i++ {
		ph, total, ns := traceWake(b, env, dir)
		syncs = append(syncs, time.Duration(ns))
		r := map[string]time.Duration{}
		for _, p := range ph {
			r[p.label] = p.d
			if !slices.Contains(order, p.label) {
				order = append(order, p.label)
			}
		}
		runs = append(runs, r)
		traced = append(traced, total)
	}
	for _, name := range order {
		var d []time.Duration
		for _, r := range runs {
			d = append(d, r[name])
		}
		record(groupPhase, "wake phase (strace -f; median per phase)", name, ms(median(d)), "", nil)
	}
	record(groupPhase, "wake phase (strace -f; median per phase)", "fsync and fdatasync calls of the wake",
		fmt.Sprintf("%d (n=%d)", int64(median(syncs)), traces), "", nil)
	record(groupPhase, "wake phase (strace -f; median per phase)", "whole traced wake (untraced: see above)",
		fmt.Sprintf("median %s (n=%d)", ms(median(traced)), traces), "", nil)
}

// generatorDirs are where a user manager looks for generators (systemd.generator(7),
// systemd.environment-generator(7)); /run/... is private to each manager and empty here.
var generatorDirs = []struct {
	dir string
	env bool // an environment generator: no arguments
}{
	{"/etc/systemd/user-generators", false}, {"/usr/local/lib/systemd/user-generators", false},
	{"/usr/lib/systemd/user-generators", false}, {"/etc/systemd/user-environment-generators", true},
	{"/usr/local/lib/systemd/user-environment-generators", true}, {"/usr/lib/systemd/user-environment-generators", true},
}

// timeGenerators runs the machine's user generators (unit generators into temporary
// directories) as the manager does on every reload, and returns the median total: the part of
// a reload that belongs to the machine, not to cryochamber.
func timeGenerators(b *testing.B, n int) (time.Duration, []string) {
	type gen struct {
		path string
		env  bool
	}
	var gens []gen
	var names []string
	seen := map[string]bool{}
	for _, d := range generatorDirs {
		ents, err := os.ReadDir(d.dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			p := filepath.Join(d.dir, e.Name())
			real, err := filepath.EvalSymlinks(p)
			fi, serr := os.Stat(p)
			if err != nil || serr != nil || seen[e.Name()] || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			seen[e.Name()] = true
			gens = append(gens, gen{real, d.env})
			names = append(names, e.Name())
		}
	}
	if len(gens) == 0 {
		return 0, nil
	}
	var d []time.Duration
	for i := 0; i < n; i++ {
		out := b.TempDir()
		t0 := time.Now()
		for _, g := range gens {
			argv := []string{g.path}
			if !g.env {
				argv = append(argv, out, out, out)
			}
			run(b, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + out}, out, argv...)
		}
		d = append(d, time.Since(t0))
	}
	return median(d), names
}

// traceWake runs one wake under `strace -f` (only the system calls that mark the phases, with
// a seccomp filter so that the others run untraced) and splits its wall time into phases.
func traceWake(b *testing.B, env []string, dir string) ([]phase, time.Duration, int) {
	b.Helper()
	out := filepath.Join(b.TempDir(), "strace.txt")
	if *keepTrace != "" {
		out = filepath.Join(*keepTrace, "strace.txt") // the last traced wake's, to read by eye
	}
	mustRun(b, env, dir, "strace", "-f", "-ttt", "-s", "400", "--seccomp-bpf",
		"-e", "trace=execve,openat,write,connect,exit_group,fsync,fdatasync", "-o", out,
		bin, "wake", "--now", "--dir", dir)
	evs, err := readTrace(out)
	if err != nil {
		b.Fatal(err)
	}
	ph, total := phases(evs)
	if len(ph) == 0 {
		b.Fatalf("no phases found in %s", out)
	}
	syncs := 0 // fsync and fdatasync calls of the wake (issue 28: each is a wait for the disk)
	for _, e := range evs {
		if strings.HasPrefix(e.call, "fsync(") || strings.HasPrefix(e.call, "fdatasync(") {
			syncs++
		}
	}
	return ph, total, syncs
}

// event is one line of an strace -f -ttt log.
type event struct {
	pid  int
	t    time.Time
	call string // "execve(...) = 0", or "+++ exited with 0 +++"
}

var traceLine = regexp.MustCompile(`^(\d+) +(\d+)\.(\d{6}) (.*)$`)

func readTrace(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var evs []event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(m[4], "<...") {
			continue // a resumed call: its start line was kept
		}
		pid, _ := strconv.Atoi(m[1])
		sec, _ := strconv.ParseInt(m[2], 10, 64)
		usec, _ := strconv.ParseInt(m[3], 10, 64)
		evs = append(evs, event{pid: pid, t: time.Unix(sec, usec*1000), call: m[4]})
	}
	return evs, sc.Err()
}

// The D-Bus calls of the backend, recognised by their member name in the message written to
// the bus (the body of a Get names the property).
var dbusCalls = []struct{ name, label string }{
	{"StartTransientUnit", "StartTransientUnit + job"},
	{"NeedDaemonReload", "Get NeedDaemonReload (is the service file newer than the manager's copy?)"},
	{"EnableUnitFiles", "EnableUnitFiles"},
	{"DisableUnitFiles", "DisableUnitFiles"},
	{`\0\0\0Reload\0`, "Reload (daemon-reload)"},
	{"RestartUnit", "RestartUnit + job"},
	{"StopUnit", "StopUnit + job"},
	{"StartUnit", "StartUnit + job"},
	{"NextElapseUSecRealtime", "Get NextElapseUSecRealtime (read back)"},
	{"LoadState", "Get LoadState (read back, or is the unit unchanged?)"},
	{"SystemState", "SystemState (does the manager answer?)"},
}

// phase is the time spent in one named phase of a wake (summed over its occurrences).
type phase struct {
	label string
	d     time.Duration
}

// phases splits a traced wake into named phases, in the order they first began: each phase
// starts at a marking event and lasts until the next one; the wake ends when its main thread
// (the first id of the trace) exits.
func phases(evs []event) ([]phase, time.Duration) {
	if len(evs) == 0 {
		return nil, 0
	}
	// strace -f names threads by their own ids: every id is cryochamber's except the processes
	// it starts (they begin with an execve of another program).
	child := map[int]bool{}
	type mark struct {
		t     time.Time
		label string
	}
	var marks []mark
	add := func(t time.Time, label string) { marks = append(marks, mark{t, label}) }
	arm := "" // which unit the backend is working on
	agentPid := 0
	saves := 0
	agentRec := false // the agent's start was recorded in agent.json, not by a save of the state
	add(evs[0].t, "process start: exec, Go runtime init, flags")
	var end time.Time
	for _, e := range evs {
		c := e.call
		switch {
		case e.pid == evs[0].pid && strings.HasPrefix(c, "+++ exited"):
			end = e.t
		case strings.HasPrefix(c, "execve(") && e.pid != evs[0].pid:
			child[e.pid] = true
			if strings.Contains(c, "agent.sh") {
				agentPid = e.pid
			}
		case e.pid == agentPid && strings.HasPrefix(c, "+++ exited"):
			add(e.t, "agent exit → END line + fsync")
			agentPid = -1
		case child[e.pid]:
		case strings.HasPrefix(c, "openat(") && strings.Contains(c, "/lock\"") && saves == 0:
			add(e.t, "take the lock; load state.json, the accepted cryo.toml, the pins")
		case strings.HasPrefix(c, "openat(") && strings.Contains(c, "/.agent.json.tmp-"):
			agentRec = true
			add(e.t, "record agent.json (the agent's process group, the session's dead-man, the log offset; no fsync)")
		case strings.HasPrefix(c, "openat(") && strings.Contains(c, "/.state.json.tmp-"):
			saves++
			switch {
			case saves == 1:
				add(e.t, "save state.json (running) + the timer.json view")
			case saves == 2 && !agentRec:
				// An earlier build (-cryo.bin of one), or a state that changed otherwise since the claim.
				add(e.t, "save state.json (the agent's process group, the session's dead-man, the log offset) + view")
			case saves == 2 || saves == 3 && !agentRec:
				add(e.t, "save state.json (armed) + view; history")
			default:
				add(e.t, "save state.json again after an alert or notice; exit")
			}
		case strings.HasPrefix(c, "openat(") && strings.Contains(c, "/.block.json.tmp-"):
			add(e.t, "record the closed block (block.json, no fsync)")
		case strings.HasPrefix(c, "openat(") && strings.Contains(c, "/.prompt.md.tmp-"):
			add(e.t, "write the prompt")
		case strings.HasPrefix(c, "openat(") && strings.Contains(c, "/cryo.log\"") && strings.Contains(c, "O_APPEND") && saves == 1:
			add(e.t, "SESSION line + fsync")
		case strings.HasPrefix(c, "write(1, \"session ") && strings.Contains(c, ": running "):
			add(e.t, "agent: fork, exec, run")
		case strings.HasPrefix(c, "write(1, \"session ") && strings.Contains(c, ": EXIT "):
			add(e.t, "validate steps 1-3")
		case strings.HasPrefix(c, "connect("):
			add(e.t, "D-Bus: connect, authenticate")
		case strings.HasPrefix(c, "openat(") && strings.Contains(c, "/systemd/user/.cryo-"):
			add(e.t, "write unit files (only when their content changed)")
		case strings.HasPrefix(c, "write(1, \"step 7"):
			add(e.t, "steps 7-8: log writable, free disk")
		case strings.HasPrefix(c, "write(1, \"step 6"):
			add(e.t, "inbox watcher (Watch)")
			arm = "inbox watcher"
		case strings.HasPrefix(c, "write(") && !strings.HasPrefix(c, "write(1,") && !strings.HasPrefix(c, "write(2,") && strings.Contains(c, `"l\1`):
			for _, d := range dbusCalls {
				if strings.Contains(c, d.name) {
					label := d.label
					if u := unitOf(c); u != "" {
						label = u + ": " + label
					} else if arm != "" {
						label = arm + ": " + label
					}
					add(e.t, label)
					break
				}
			}
		}
	}
	if end.IsZero() {
		end = evs[len(evs)-1].t
	}
	var out []phase
	idx := map[string]int{}
	for i, mk := range marks {
		next := end
		if i+1 < len(marks) {
			next = marks[i+1].t
		}
		j, ok := idx[mk.label]
		if !ok {
			j = len(out)
			idx[mk.label] = j
			out = append(out, phase{label: mk.label})
		}
		out[j].d += next.Sub(mk.t)
	}
	return out, end.Sub(evs[0].t)
}

// unitOf names the unit a D-Bus message is about, from its name in the body (StartTransientUnit,
// StopUnit) or in the object path of a property read (escaped: "-" is "_2d", "." is "_2e").
func unitOf(msg string) string {
	for _, u := range []struct{ suffix, label string }{
		{"wake.timer", "wake timer"}, {"fallback.timer", "dead-man timer"}, {"alert.timer", "alert timer"},
		{"wake.service", "wake service"}, {"fallback.service", "dead-man service"}, {"inbox.path", "inbox watcher"},
	} {
		esc := strings.NewReplacer("-", "_2d", ".", "_2e").Replace(u.suffix)
		if strings.Contains(msg, "-"+u.suffix) || strings.Contains(msg, "_2d"+esc) {
			return u.label
		}
	}
	return ""
}
