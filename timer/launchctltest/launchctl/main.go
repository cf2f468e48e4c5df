// Command launchctl is a stand-in for macOS's launchctl, for tests on machines without launchd.
//
// It implements the subcommands cryochamber uses, on the gui/<uid> domain: bootstrap, bootout,
// print (of a service, in launchctl's layout, calendar descriptor included, or of the domain),
// print-disabled and kickstart. Every failure it gives is a replay of a real launchctl answer
// from a public report, with its source and macOS release (fakestate.Replies). It keeps what
// is loaded in the directory named by $CRYO_FAKE_LAUNCHCTL_DIR and appends every call there;
// see package fakestate for the files and the knobs. It never runs the jobs' programs: a run
// is only counted. It checks each plist it loads against launchd.plist(5)'s types
// (plistschema) and refuses one launchd would refuse, as launchd does, with a 5.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"howett.net/plist"

	"github.com/cryochamber/cryochamber/timer/launchctltest/fakestate"
	"github.com/cryochamber/cryochamber/timer/launchctltest/plistschema"
)

// Exit statuses of the stand-in's own complaints (launchd's come from fakestate.Replies).
const (
	exitUsage     = 64
	exitSoftware  = 70
	calendarBase  = 268435472 // launchd numbers event trigger entries from here
	fakeASID      = 100003
	maxPlistBytes = 1 << 20
)

// answer is what one call prints and returns.
type answer struct {
	stdout, stderr string
	code           int
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	dir := os.Getenv(fakestate.EnvDir)
	if dir == "" {
		fmt.Fprintf(stderr, "stand-in launchctl: $%s is not set\n", fakestate.EnvDir)
		return exitSoftware
	}
	if err := record(dir, args); err != nil {
		fmt.Fprintf(stderr, "stand-in launchctl: %v\n", err)
		return exitSoftware
	}
	st, err := fakestate.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "stand-in launchctl: %v\n", err)
		return exitSoftware
	}
	a := dispatch(st, args)
	if err := st.Save(dir); err != nil {
		fmt.Fprintf(stderr, "stand-in launchctl: %v\n", err)
		return exitSoftware
	}
	io.WriteString(stdout, a.stdout)
	io.WriteString(stderr, a.stderr)
	return a.code
}

// record appends the call to the call log.
func record(dir string, args []string) error {
	line, err := json.Marshal(append([]string{}, args...))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, fakestate.CallsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func dispatch(st *fakestate.State, args []string) answer {
	if len(args) == 0 {
		return answer{stderr: "Usage: launchctl <subcommand> ... | help [subcommand]\n", code: exitUsage}
	}
	switch args[0] {
	case "bootstrap":
		return bootstrap(st, args[1:])
	case "bootout":
		return bootout(st, args[1:])
	case "print":
		return printJob(st, args[1:])
	case "print-disabled":
		return printDisabled(st, args[1:])
	case "kickstart":
		return kickstart(st, args[1:])
	}
	return answer{stderr: fmt.Sprintf("Unrecognized subcommand: %s\n", args[0]), code: exitUsage}
}

// replay answers with a recorded reply.
func replay(name, domain, label, path string) answer {
	r, ok := fakestate.Replies[name]
	if !ok {
		return answer{stderr: "stand-in launchctl: no reply " + name + "\n", code: exitSoftware}
	}
	out, errOut := r.Render(strings.TrimPrefix(domain, "gui/"), label, path)
	return answer{stdout: out, stderr: errOut, code: r.Code}
}

// noGUI is the answer of a subcommand when the gui domain does not exist (State.NoGUI), or
// nil when it does.
func noGUI(st *fakestate.State, verb, domain, label, path string) *answer {
	if st.NoGUI == "" {
		return nil
	}
	var name string
	switch verb {
	case "print":
		name = "print-no-domain-" + st.NoGUI
		if st.NoGUI == "5" {
			name = "print-no-domain-125"
		}
	case "bootstrap":
		name = "bootstrap-no-domain-" + st.NoGUI
	case "kickstart", "bootout":
		name = "kickstart-no-domain-125"
	case "print-disabled":
		name = "print-no-domain-" + st.NoGUI
		if st.NoGUI == "5" {
			name = "print-no-domain-125"
		}
	}
	a := replay(name, domain, label, path)
	return &a
}

// serviceTarget splits gui/<uid>/<label>.
func serviceTarget(s string) (domain, label string, ok bool) {
	rest, ok := strings.CutPrefix(s, "gui/")
	if !ok {
		return "", "", false
	}
	uid, label, ok := strings.Cut(rest, "/")
	if !ok || label == "" || uid == "" || strings.Trim(uid, "0123456789") != "" {
		return "", "", false
	}
	return "gui/" + uid, label, true
}

func validDomain(s string) bool {
	uid, ok := strings.CutPrefix(s, "gui/")
	return ok && uid != "" && strings.Trim(uid, "0123456789") == ""
}

func bootstrap(st *fakestate.State, args []string) answer {
	if len(args) < 2 || !validDomain(args[0]) {
		return answer{stderr: "Usage: launchctl bootstrap <domain-target> [service-path, service-path2, ...]\n", code: exitUsage}
	}
	domain := args[0]
	if a := noGUI(st, "bootstrap", domain, "", args[1]); a != nil {
		return *a
	}
	for _, path := range args[1:] {
		job, err := load(domain, path)
		if err != nil {
			// launchd says no more than this for an unreadable or malformed plist.
			return replay("bootstrap-io-5", domain, "", path)
		}
		if n := st.Lingering[job.Target]; n > 0 {
			// The bootout before this one has not finished on launchd's side.
			st.Lingering[job.Target] = n - 1
			return replay("bootstrap-io-5", domain, job.Label, path)
		}
		if st.Jobs[job.Target] != nil {
			return replay("bootstrap-io-5", domain, job.Label, path)
		}
		if st.IsDisabled(job.Target) {
			if st.DisabledAnswer == 5 {
				return replay("bootstrap-disabled-5", domain, job.Label, path)
			}
			return replay("bootstrap-disabled-119", domain, job.Label, path)
		}
		st.Bootstraps[job.Target]++
		if job.RunAtLoad {
			// The job runs at once; the stand-in counts the run as an instant success.
			zero := 0
			job.Runs, job.LastExit = 1, &zero
		}
		st.Jobs[job.Target] = job
	}
	return answer{}
}

// load reads a plist as launchd would for an agent in a user's domain.
func load(domain, path string) (*fakestate.Job, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o022 != 0 || !fi.Mode().IsRegular() || fi.Size() > maxPlistBytes {
		return nil, fmt.Errorf("%s: bad ownership, permissions or size", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if _, err := plistschema.Check(data); err != nil {
		return nil, err
	}
	var p map[string]any
	if _, err := plist.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	label, _ := p["Label"].(string)
	if label == "" {
		return nil, fmt.Errorf("no Label")
	}
	j := &fakestate.Job{Target: domain + "/" + label, Domain: domain, Label: label, Path: path}
	if args, ok := p["ProgramArguments"].([]any); ok {
		for _, a := range args {
			s, ok := a.(string)
			if !ok {
				return nil, fmt.Errorf("ProgramArguments holds a %T", a)
			}
			j.Arguments = append(j.Arguments, s)
		}
	}
	j.Program, _ = p["Program"].(string)
	if j.Program == "" && len(j.Arguments) > 0 {
		j.Program = j.Arguments[0]
	}
	if j.Program == "" {
		return nil, fmt.Errorf("no program")
	}
	j.WorkingDirectory, _ = p["WorkingDirectory"].(string)
	j.Stdout, _ = p["StandardOutPath"].(string)
	j.Stderr, _ = p["StandardErrorPath"].(string)
	j.ProcessType, _ = p["ProcessType"].(string)
	j.RunAtLoad, _ = p["RunAtLoad"].(bool)
	if env, ok := p["EnvironmentVariables"].(map[string]any); ok {
		j.Env = map[string]string{}
		for k, v := range env {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("EnvironmentVariables.%s is a %T", k, v)
			}
			j.Env[k] = s
		}
	}
	switch c := p["StartCalendarInterval"].(type) {
	case nil:
	case map[string]any:
		m, err := calendar(c)
		if err != nil {
			return nil, err
		}
		j.Calendars = append(j.Calendars, m)
	case []any:
		for _, e := range c {
			d, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("StartCalendarInterval holds a %T", e)
			}
			m, err := calendar(d)
			if err != nil {
				return nil, err
			}
			j.Calendars = append(j.Calendars, m)
		}
	default:
		return nil, fmt.Errorf("StartCalendarInterval is a %T", c)
	}
	switch n := p["StartInterval"].(type) {
	case uint64:
		j.StartInterval = int(n)
	case int64:
		j.StartInterval = int(n)
	}
	if w, ok := p["WatchPaths"].([]any); ok {
		for _, e := range w {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("WatchPaths holds a %T", e)
			}
			j.WatchPaths = append(j.WatchPaths, s)
		}
	}
	return j, nil
}

func calendar(d map[string]any) (map[string]int, error) {
	m := map[string]int{}
	for k, v := range d {
		switch k {
		case "Month", "Day", "Weekday", "Hour", "Minute":
		default:
			return nil, fmt.Errorf("unknown calendar key %s", k)
		}
		switch n := v.(type) {
		case uint64:
			m[k] = int(n)
		case int64:
			m[k] = int(n)
		default:
			return nil, fmt.Errorf("calendar %s is a %T", k, v)
		}
	}
	return m, nil
}

func bootout(st *fakestate.State, args []string) answer {
	if len(args) != 1 {
		return answer{stderr: "Usage: launchctl bootout <service-target>\n", code: exitUsage}
	}
	domain, label, ok := serviceTarget(args[0])
	if !ok {
		return answer{stderr: "Unrecognized target specifier.\n", code: exitUsage}
	}
	target := domain + "/" + label
	if a := noGUI(st, "bootout", domain, label, ""); a != nil {
		return *a
	}
	j := st.Jobs[target]
	if j == nil {
		if os.Getenv(fakestate.EnvESRCH) == "1" {
			return replay("bootout-esrch-3", domain, label, "")
		}
		return replay("bootout-not-found-113", domain, label, "")
	}
	if j.Running {
		// launchd stops a running job it unloads: SIGTERM to its process group.
		st.Killed = append(st.Killed, target)
	}
	delete(st.Jobs, target)
	if n, err := strconv.Atoi(os.Getenv(fakestate.EnvLinger)); err == nil && n > 0 {
		st.Lingering[target] = n
	}
	if n, err := strconv.Atoi(os.Getenv(fakestate.EnvInProgress)); err == nil && n > 0 {
		// The job goes, but not before bootout returns (osquery/osquery#5698).
		st.Stopping[target] = n
		stopped := *j
		stopped.Running, stopped.PID = false, 0
		st.Jobs[target] = &stopped
		return replay("bootout-in-progress-36", domain, label, "")
	}
	return answer{}
}

func kickstart(st *fakestate.State, args []string) answer {
	kill := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-k":
			kill = true
		case "-p", "-s":
		default:
			return answer{stderr: "Usage: launchctl kickstart [-kp] <service-target>\n", code: exitUsage}
		}
		args = args[1:]
	}
	if len(args) != 1 {
		return answer{stderr: "Usage: launchctl kickstart [-kp] <service-target>\n", code: exitUsage}
	}
	domain, label, ok := serviceTarget(args[0])
	if !ok {
		return answer{stderr: "Unrecognized target specifier.\n", code: exitUsage}
	}
	if a := noGUI(st, "kickstart", domain, label, ""); a != nil {
		return *a
	}
	j := st.Jobs[domain+"/"+label]
	if j == nil {
		return replay("kickstart-not-found", domain, label, "")
	}
	if j.Running {
		if !kill {
			return answer{} // already running: nothing to start
		}
		st.Killed = append(st.Killed, j.Target)
	}
	zero := 0
	j.Runs++
	j.LastExit = &zero
	j.Running, j.PID = false, 0
	st.Kicked = append(st.Kicked, j.Target)
	return answer{}
}

func printJob(st *fakestate.State, args []string) answer {
	if len(args) != 1 {
		return answer{stderr: "Usage: launchctl print <domain-target | service-target>\n", code: exitUsage}
	}
	if validDomain(args[0]) {
		// The whole domain: the stand-in prints only its first lines (a real one runs to
		// 100 KiB and more; callers want the exit status).
		if a := noGUI(st, "print", args[0], "", ""); a != nil {
			return *a
		}
		return answer{stdout: args[0] + " = {\n\ttype = login\n\thandle = " + strconv.Itoa(fakeASID) + "\n\tactive count = " +
			strconv.Itoa(len(st.Jobs)) + "\n}\n"}
	}
	domain, label, ok := serviceTarget(args[0])
	if !ok {
		return answer{stderr: "Unrecognized target specifier.\n", code: exitUsage}
	}
	if a := noGUI(st, "print", domain, label, ""); a != nil {
		return *a
	}
	target := domain + "/" + label
	j := st.Jobs[target]
	if n := st.Stopping[target]; j != nil && n > 0 {
		// Booted out with 36: still shown until launchd is done with it.
		if n == 1 {
			delete(st.Stopping, target)
			delete(st.Jobs, target)
		} else {
			st.Stopping[target] = n - 1
		}
	}
	if j == nil {
		return replay("print-not-found", domain, label, "")
	}
	return answer{stdout: describe(j)}
}

// printDisabled lists the disabled targets of a domain, in the layout State.DisabledLayout
// names.
func printDisabled(st *fakestate.State, args []string) answer {
	if len(args) != 1 || !validDomain(args[0]) {
		return answer{stderr: "Usage: launchctl print-disabled <domain-target>\n", code: exitUsage}
	}
	domain := args[0]
	if a := noGUI(st, "print-disabled", domain, "", ""); a != nil {
		return *a
	}
	name, on, off := "print-disabled-modern", "enabled", "disabled"
	if st.DisabledLayout == "legacy" {
		name, on, off = "print-disabled-legacy", "false", "true"
	}
	entries := "\t\"com.docker.helper\" => " + on + "\n"
	for _, t := range st.Disabled {
		if d, l, ok := serviceTarget(t); ok && d == domain {
			entries += "\t\"" + l + "\" => " + off + "\n"
		}
	}
	a := replay(name, domain, "", "")
	a.stdout = strings.Replace(a.stdout, "{entries}", entries, 1)
	return a
}

// describe renders a job as `launchctl print` does (layout from a capture on macOS 26.6.2).
func describe(j *fakestate.Job) string {
	var b strings.Builder
	line := func(depth int, format string, a ...any) {
		b.WriteString(strings.Repeat("\t", depth))
		fmt.Fprintf(&b, format, a...)
		b.WriteByte('\n')
	}
	active, state := 0, "not running"
	if j.Running {
		active, state = 1, "running"
	}
	line(0, "%s = {", j.Target)
	line(1, "active count = %d", active)
	line(1, "path = %s", j.Path)
	line(1, "type = LaunchAgent")
	line(1, "state = %s", state)
	b.WriteByte('\n')
	line(1, "program = %s", j.Program)
	line(1, "arguments = {")
	for _, a := range j.Arguments {
		line(2, "%s", a)
	}
	line(1, "}")
	b.WriteByte('\n')
	if j.WorkingDirectory != "" {
		line(1, "working directory = %s", j.WorkingDirectory)
		b.WriteByte('\n')
	}
	if j.Stdout != "" {
		line(1, "stdout path = %s", j.Stdout)
	}
	if j.Stderr != "" {
		line(1, "stderr path = %s", j.Stderr)
	}
	line(1, "inherited environment = {")
	line(2, "SSH_AUTH_SOCK => /private/tmp/com.apple.launchd.stand-in/Listeners")
	line(1, "}")
	b.WriteByte('\n')
	line(1, "default environment = {")
	line(2, "PATH => /usr/bin:/bin:/usr/sbin:/sbin")
	line(1, "}")
	b.WriteByte('\n')
	env := map[string]string{"OSLogRateLimit": "64", "XPC_SERVICE_NAME": j.Label}
	for k, v := range j.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	line(1, "environment = {")
	for _, k := range keys {
		line(2, "%s => %s", k, env[k])
	}
	line(1, "}")
	b.WriteByte('\n')
	line(1, "domain = %s [%d]", j.Domain, fakeASID)
	line(1, "asid = %d", fakeASID)
	line(1, "minimum runtime = 10")
	line(1, "exit timeout = 5")
	line(1, "runs = %d", j.Runs)
	if j.Running {
		line(1, "pid = %d", j.PID)
	}
	if j.LastExit == nil {
		line(1, "last exit code = (never exited)")
	} else {
		line(1, "last exit code = %d", *j.LastExit)
	}
	b.WriteByte('\n')
	if len(j.Calendars) > 0 || len(j.WatchPaths) > 0 {
		line(1, "event triggers = {")
		for i, c := range j.Calendars {
			line(2, "%s.%d => {", j.Label, calendarBase+i)
			line(3, "keepalive = 0")
			line(3, "service = %s", j.Label)
			line(3, "stream = com.apple.launchd.calendarinterval")
			line(3, "monitor = com.apple.UserEventAgent-Aqua")
			line(3, "descriptor = {")
			// launchd prints the fields in its dictionary's order, not the plist's.
			for _, k := range []string{"Minute", "Hour", "Weekday", "Day", "Month"} {
				if v, ok := c[k]; ok {
					line(4, "%q => %d", k, v)
				}
			}
			line(3, "}")
			line(2, "}")
		}
		if len(j.WatchPaths) > 0 {
			line(2, "com.apple.launchd.WatchPaths => {")
			line(3, "keepalive = 0")
			line(3, "service = %s", j.Label)
			line(3, "stream = com.apple.fsevents.matching")
			line(3, "monitor = com.apple.UserEventAgent-Aqua")
			line(3, "descriptor = {")
			line(4, "\"WatchPaths\" => [")
			for i, p := range j.WatchPaths {
				line(5, "%d = \"%s\"", i, p)
			}
			line(4, "]")
			line(3, "}")
			line(2, "}")
		}
		line(1, "}")
		b.WriteByte('\n')
		line(1, "event channels = {")
		if len(j.Calendars) > 0 {
			channel(line, "com.apple.launchd.calendarinterval")
		}
		if len(j.WatchPaths) > 0 {
			channel(line, "com.apple.fsevents.matching")
		}
		line(1, "}")
		b.WriteByte('\n')
	}
	line(1, "spawn type = daemon (3)")
	line(1, "jetsam priority = 40")
	props := "inferred program"
	if j.RunAtLoad {
		props = "runatload | " + props
	}
	line(1, "properties = %s", props)
	line(0, "}")
	return b.String()
}

func channel(line func(int, string, ...any), name string) {
	line(2, "%q = {", name)
	line(3, "port = 0x92a03")
	line(3, "active = 0")
	line(3, "managed = 1")
	line(3, "reset = 0")
	line(3, "hide = 0")
	line(3, "watching = 1")
	line(2, "}")
}
