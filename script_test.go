package main

// CLI scripts: each testdata/script/*.txtar is a small script run against the built binary, in
// the spirit of Go's testscript. The comment section of the archive is the script; its files
// are written to $WORK (files starting with "#!" are made executable). `manager` starts a
// private systemd user manager for the script, so timers really fire.
//
// Commands (a leading "! " negates: the command must fail, or the check must not hold):
//
//	manager                     start a private user manager (skips where it cannot run)
//	stop-manager / restart-manager
//	cryo ARGS...                run the cryochamber binary; must exit 0 (with "!": non-zero)
//	status N                    the last cryo/exec exited with status N
//	exec PROG ARGS...           run another program
//	bg NAME cryo|exec ARGS...   start in the background; `wait NAME` waits for it
//	stdout RE / stderr RE       the last command's output matches the regular expression
//	exists PATH / grep RE FILE / count N RE FILE   (FILE may be a directory: all its files)
//	files N DIR                 DIR holds N regular, non-hidden files
//	smtpd                       start a real SMTP server (aiosmtpd); sets SMTP_PORT and MAILDIR
//	webhookd                    start an HTTP server that records each request in $WORK/webhook/; sets WEBHOOK_URL
//	expand FILE                 replace $VARS in FILE (cryo.toml needs the ports)
//	dead PIDFILE                the process whose PID is in PIDFILE is gone (or a zombie)
//	json FILE KEY VALUE         a top-level key of a JSON file (timer.json) has that value
//	units N                     N cryo-* unit files are installed
//	timers N                    the manager reports N active cryo-* timers
//	wait-phase DIR PHASE [SESSION] [TIMEOUT]   poll DIR/timer.json until that phase (and session)
//	wait-file PATH [TIMEOUT]    poll until PATH exists
//	wait-files N DIR [TIMEOUT]  poll until DIR holds at least N regular files
//	env KEY=VALUE / cd DIR / mkdir DIR / rm PATH / cp SRC DST / chmod MODE PATH / sleep DURATION
//	setenv-file VAR FILE        set VAR to the trimmed content of FILE
//	date VAR OFFSET [LAYOUT]    set VAR to now+OFFSET in UTC (RFC 3339 by default)
//	skip MESSAGE
//
// Arguments are split on spaces with "double quotes" grouping and 'single quotes' literal; $VAR and ${VAR} expand from the
// script's environment (WORK, HOME, ...).

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

var (
	binDir  string // holds the cryochamber binary built for the tests
	binPath string
	runOnly = flag.String("script", "", "run only the scripts whose name contains this")
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "cryo-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	binPath = filepath.Join(dir, "cryochamber")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building cryochamber: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// CRYO_TEST_BINARY runs the end-to-end tests against another build (an older commit's, to
	// see a new test fail before its fix).
	if p := os.Getenv("CRYO_TEST_BINARY"); p != "" {
		binPath = p
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/script/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txtar")
		if *runOnly != "" && !strings.Contains(name, *runOnly) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runScript(t, f)
		})
	}
}

// txtar is the archive format: a comment, then files introduced by "-- name --" lines.
type txtar struct {
	comment string
	files   []txtarFile
}

type txtarFile struct {
	name string
	data []byte
}

func parseTxtar(data []byte) txtar {
	var a txtar
	var cur *txtarFile
	var buf bytes.Buffer
	flush := func() {
		if cur == nil {
			a.comment = buf.String()
		} else {
			cur.data = append([]byte(nil), buf.Bytes()...)
			a.files = append(a.files, *cur)
		}
		buf.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		t := strings.TrimRight(line, "\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			flush()
			cur = &txtarFile{name: strings.TrimSpace(t[3 : len(t)-3])}
			continue
		}
		buf.WriteString(line)
	}
	flush()
	return a
}

type scriptState struct {
	t       *testing.T
	work    string
	dir     string // current directory
	env     map[string]string
	mgr     *systemdtest.Manager
	stdout  string
	stderr  string
	status  int
	lineNo  int
	file    string
	bg      map[string]*bgCmd
	started time.Time
}

type bgCmd struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	err    bytes.Buffer
	done   chan struct{}
	status int
}

func runScript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	a := parseTxtar(data)
	work := t.TempDir()
	s := &scriptState{t: t, work: work, dir: work, file: file, bg: map[string]*bgCmd{}, started: time.Now()}
	s.env = map[string]string{
		"WORK": work,
		"HOME": filepath.Join(work, ".home"),
		"PATH": binDir + ":" + os.Getenv("PATH"),
		"TZ":   "UTC",
		"LANG": "C.UTF-8",
	}
	_ = os.MkdirAll(s.env["HOME"], 0o755)
	for _, f := range a.files {
		p := filepath.Join(work, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if bytes.HasPrefix(f.data, []byte("#!")) {
			mode = 0o755
		}
		if err := os.WriteFile(p, f.data, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for name, b := range s.bg {
			select {
			case <-b.done:
			default:
				_ = b.cmd.Process.Kill()
				<-b.done
				t.Errorf("background command %s was still running at the end", name)
			}
		}
	})
	defer func() {
		if t.Failed() && s.mgr != nil {
			t.Logf("manager journal (tail):\n%s", tail(s.mgr.Journal(t), 6000))
		}
	}()
	for i, line := range strings.Split(a.comment, "\n") {
		s.lineNo = i + 1
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !s.exec(line) {
			return
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func (s *scriptState) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s:%d: %s\n[stdout]\n%s[stderr]\n%s", s.file, s.lineNo, fmt.Sprintf(format, args...), s.stdout, s.stderr)
}

func (s *scriptState) expand(w string) string {
	return os.Expand(w, func(k string) string { return s.env[k] })
}

// fields splits a script line: spaces separate, "double quotes" group, \" escapes a quote.
func (s *scriptState) fields(line string) []string {
	var out []string
	var b strings.Builder
	inQ, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' && !inQ:
			// 'single quotes' are literal (regular expressions), with '' for one quote.
			j := i + 1
			for ; j < len(line); j++ {
				if line[j] == '\'' {
					if j+1 < len(line) && line[j+1] == '\'' {
						b.WriteByte('\'')
						j++
						continue
					}
					break
				}
				b.WriteByte(line[j])
			}
			i, have = j, true
		case c == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\'):
			b.WriteByte(line[i+1])
			i++
			have = true
		case c == '"':
			inQ, have = !inQ, true
		case c == ' ' && !inQ:
			if have {
				out = append(out, s.expand(b.String()))
				b.Reset()
				have = false
			}
		default:
			b.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, s.expand(b.String()))
	}
	return out
}

func (s *scriptState) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.dir, p)
}

func (s *scriptState) environ() []string {
	var out []string
	for k, v := range s.env {
		out = append(out, k+"="+v)
	}
	return out
}

func (s *scriptState) command(args []string) *exec.Cmd {
	prog := args[0]
	if prog == "cryo" {
		prog = binPath
	}
	cmd := exec.Command(prog, args[1:]...)
	cmd.Dir = s.dir
	cmd.Env = s.environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs a foreground command, bounded by a minute.
func (s *scriptState) run(args []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := s.command(args)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		s.fatalf("start %s: %v", args[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		s.stdout, s.stderr = out.String(), errb.String()
		s.fatalf("%s did not finish within 90s", strings.Join(args, " "))
	}
	s.stdout, s.stderr = out.String(), errb.String()
	s.status = 0
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			s.status = ee.ExitCode()
		} else {
			s.fatalf("%s: %v", args[0], err)
		}
	}
}

func (s *scriptState) exec(line string) bool {
	t := s.t
	neg := false
	if strings.HasPrefix(line, "! ") {
		neg, line = true, strings.TrimSpace(line[2:])
	}
	args := s.fields(line)
	if len(args) == 0 {
		return true
	}
	check := func(ok bool, what string) {
		t.Helper()
		if ok == neg {
			if neg {
				s.fatalf("unexpectedly: %s", what)
			}
			s.fatalf("expected: %s", what)
		}
	}
	need := func(n int) {
		if len(args)-1 < n {
			s.fatalf("%s needs %d argument(s)", args[0], n)
		}
	}
	switch args[0] {
	case "manager":
		s.mgr = systemdtest.Start(t)
		for _, kv := range s.mgr.Env() {
			k, v, _ := strings.Cut(kv, "=")
			if k == "PATH" {
				continue
			}
			s.env[k] = v
		}
		s.env["UNITDIR"] = s.mgr.UnitDir
	case "stop-manager":
		s.needManager()
		s.mgr.Stop(t)
	case "restart-manager":
		s.needManager()
		s.mgr.Restart(t)
	case "skip":
		t.Skip(strings.Join(args[1:], " "))
	case "cryo", "exec":
		if args[0] == "exec" {
			args = args[1:]
		}
		s.run(args)
		if neg && s.status == 0 {
			s.fatalf("%s succeeded, want failure", line)
		}
		if !neg && s.status != 0 {
			s.fatalf("%s exited with status %d", line, s.status)
		}
	case "bg":
		need(2)
		name := args[1]
		rest := args[2:]
		if rest[0] == "exec" {
			rest = rest[1:]
		}
		b := &bgCmd{cmd: s.command(rest), done: make(chan struct{})}
		b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.err
		if err := b.cmd.Start(); err != nil {
			s.fatalf("start %s: %v", name, err)
		}
		go func() {
			err := b.cmd.Wait()
			if ee, ok := err.(*exec.ExitError); ok {
				b.status = ee.ExitCode()
			}
			close(b.done)
		}()
		s.bg[name] = b
	case "wait":
		need(1)
		b, ok := s.bg[args[1]]
		if !ok {
			s.fatalf("no background command %s", args[1])
		}
		select {
		case <-b.done:
		case <-time.After(90 * time.Second):
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.done
			s.fatalf("background command %s did not finish within 90s", args[1])
		}
		s.stdout, s.stderr, s.status = b.out.String(), b.err.String(), b.status
	case "status":
		need(1)
		n, _ := strconv.Atoi(args[1])
		check(s.status == n, fmt.Sprintf("exit status %d (got %d)", n, s.status))
	case "stdout", "stderr":
		need(1)
		text := s.stdout
		if args[0] == "stderr" {
			text = s.stderr
		}
		re := regexp.MustCompile("(?m)" + args[1])
		check(re.MatchString(text), fmt.Sprintf("%s matches %q", args[0], args[1]))
	case "exists":
		need(1)
		_, err := os.Stat(s.path(args[1]))
		check(err == nil, args[1]+" exists")
	case "grep":
		need(2)
		data, err := readFileOrDir(s.path(args[2]))
		if err != nil && !neg {
			s.fatalf("%v", err)
		}
		check(regexp.MustCompile("(?m)"+args[1]).Match(data), fmt.Sprintf("%s matches %q", args[2], args[1]))
	case "count":
		need(3)
		n, _ := strconv.Atoi(args[1])
		data, _ := readFileOrDir(s.path(args[3]))
		got := len(regexp.MustCompile("(?m)"+args[2]).FindAll(data, -1))
		check(got == n, fmt.Sprintf("%d matches of %q in %s (got %d)", n, args[2], args[3], got))
	case "files":
		need(2)
		n, _ := strconv.Atoi(args[1])
		ents, err := os.ReadDir(s.path(args[2]))
		if err != nil && !os.IsNotExist(err) {
			s.fatalf("%v", err)
		}
		var names []string
		for _, e := range ents {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
		check(len(names) == n, fmt.Sprintf("%d files in %s (got %d: %v)", n, args[2], len(names), names))
	case "smtpd":
		s.startSMTPD()
	case "webhookd":
		s.startWebhookd()
	case "expand":
		need(1)
		data, err := os.ReadFile(s.path(args[1]))
		if err != nil {
			s.fatalf("%v", err)
		}
		if err := os.WriteFile(s.path(args[1]), []byte(s.expand(string(data))), 0o644); err != nil {
			s.fatalf("%v", err)
		}
	case "dead":
		need(1)
		data, err := os.ReadFile(s.path(args[1]))
		if err != nil {
			s.fatalf("%v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			s.fatalf("bad pid in %s", args[1])
		}
		// A killed process disappears once its parent reaps it: allow a few seconds.
		deadline := time.Now().Add(5 * time.Second)
		for processLives(pid) != neg && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		check(!processLives(pid), fmt.Sprintf("process %d (from %s) is gone", pid, args[1]))
	case "json":
		need(3)
		data, err := os.ReadFile(s.path(args[1]))
		if err != nil {
			s.fatalf("%v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			s.fatalf("%s: %v", args[1], err)
		}
		got := "<absent>"
		if v, ok := m[args[2]]; ok {
			got = fmt.Sprint(v)
			if v == nil {
				got = "null"
			}
		}
		check(got == args[3], fmt.Sprintf("%s.%s = %s (got %s)", args[1], args[2], args[3], got))
	case "units":
		need(1)
		s.needManager()
		n, _ := strconv.Atoi(args[1])
		got := s.unitFiles()
		check(len(got) == n, fmt.Sprintf("%d cryo-* unit files (got %d: %v)", n, len(got), got))
	case "timers":
		need(1)
		s.needManager()
		n, _ := strconv.Atoi(args[1])
		out := s.mgr.Systemctl(t, "list-timers", "--no-legend", "--plain", "cryo-*")
		got := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "cryo-") {
				got++
			}
		}
		check(got == n, fmt.Sprintf("%d active cryo-* timers (got %d:\n%s)", n, got, out))
	case "wait-phase":
		need(2)
		phase, session, timeout := args[2], 0, 60*time.Second
		for _, a := range args[3:] {
			if d, err := time.ParseDuration(a); err == nil {
				timeout = d
			} else if n, err := strconv.Atoi(a); err == nil {
				session = n
			}
		}
		state := filepath.Join(s.path(args[1]), "timer.json")
		deadline := time.Now().Add(timeout)
		for {
			var st struct {
				Phase   string `json:"phase"`
				Session int    `json:"session"`
			}
			data, err := os.ReadFile(state)
			if err == nil && json.Unmarshal(data, &st) == nil && st.Phase == phase && st.Session >= session {
				break
			}
			if time.Now().After(deadline) {
				s.fatalf("timer.json did not reach phase %s session %d within %s: %s", phase, session, timeout, data)
			}
			time.Sleep(100 * time.Millisecond)
		}
	case "wait-file":
		need(1)
		timeout := 60 * time.Second
		if len(args) > 2 {
			timeout, _ = time.ParseDuration(args[2])
		}
		deadline := time.Now().Add(timeout)
		for {
			if _, err := os.Stat(s.path(args[1])); err == nil {
				break
			}
			if time.Now().After(deadline) {
				s.fatalf("%s did not appear within %s", args[1], timeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	case "setenv-file":
		need(2)
		data, err := os.ReadFile(s.path(args[2]))
		if err != nil {
			s.fatalf("%v", err)
		}
		s.env[args[1]] = strings.TrimSpace(string(data))
	case "cp":
		need(2)
		if out, err := exec.Command("cp", "-R", s.path(args[1]), s.path(args[2])).CombinedOutput(); err != nil {
			s.fatalf("cp: %v: %s", err, out)
		}
	case "wait-files":
		need(2)
		n, _ := strconv.Atoi(args[1])
		timeout := 60 * time.Second
		if len(args) > 3 {
			timeout, _ = time.ParseDuration(args[3])
		}
		deadline := time.Now().Add(timeout)
		for {
			ents, _ := os.ReadDir(s.path(args[2]))
			count := 0
			for _, e := range ents {
				if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
					count++
				}
			}
			if count >= n {
				break
			}
			if time.Now().After(deadline) {
				s.fatalf("%s did not hold %d files within %s (has %d)", args[2], n, timeout, count)
			}
			time.Sleep(100 * time.Millisecond)
		}
	case "env":
		need(1)
		k, v, _ := strings.Cut(strings.Join(args[1:], " "), "=")
		s.env[k] = v
	case "cd":
		need(1)
		s.dir = s.path(args[1])
	case "mkdir":
		need(1)
		if err := os.MkdirAll(s.path(args[1]), 0o755); err != nil {
			s.fatalf("%v", err)
		}
	case "rm":
		need(1)
		if err := os.RemoveAll(s.path(args[1])); err != nil {
			s.fatalf("%v", err)
		}
	case "chmod":
		need(2)
		m, err := strconv.ParseUint(args[1], 8, 32)
		if err != nil {
			s.fatalf("bad mode %s", args[1])
		}
		if err := os.Chmod(s.path(args[2]), os.FileMode(m)); err != nil {
			s.fatalf("%v", err)
		}
	case "sleep":
		need(1)
		d, err := time.ParseDuration(args[1])
		if err != nil {
			s.fatalf("%v", err)
		}
		time.Sleep(d)
	case "date":
		need(2)
		d, err := time.ParseDuration(strings.TrimPrefix(args[2], "+"))
		if err != nil {
			s.fatalf("%v", err)
		}
		layout := time.RFC3339
		if len(args) > 3 {
			layout = args[3]
		}
		s.env[args[1]] = time.Now().UTC().Add(d).Format(layout)
	default:
		s.fatalf("unknown command %q", args[0])
	}
	return true
}

func (s *scriptState) needManager() {
	if s.mgr == nil {
		s.fatalf("this command needs `manager` first")
	}
}

var unitFilesMu sync.Mutex

func (s *scriptState) unitFiles() []string {
	unitFilesMu.Lock()
	defer unitFilesMu.Unlock()
	ents, _ := os.ReadDir(s.mgr.UnitDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cryo-") && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// readFileOrDir reads a file, or every regular file directly in a directory, concatenated.
func readFileOrDir(p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return os.ReadFile(p)
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var all []byte
	for _, e := range ents {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(p, e.Name()))
			if err != nil {
				return nil, err
			}
			all = append(all, b...)
		}
	}
	return all, nil
}

// processLives reports whether pid is a live (not zombie) process. PID 1 in a container may not
// reap orphans, so a killed orphan can linger as a zombie: that counts as dead.
func processLives(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	return data[i+2] != 'Z' && data[i+2] != 'X'
}

// startSMTPD runs Debian's aiosmtpd as a real SMTP server storing mail in $WORK/maildir.
func (s *scriptState) startSMTPD() {
	if err := exec.Command("/usr/bin/python3", "-c", "import aiosmtpd").Run(); err != nil {
		s.t.Skip("needs /usr/bin/python3 with aiosmtpd (Debian package python3-aiosmtpd)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.fatalf("%v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	maildir := filepath.Join(s.work, "maildir")
	cmd := exec.Command("/usr/bin/python3", "-m", "aiosmtpd", "-n", "-l", fmt.Sprintf("127.0.0.1:%d", port), "-c", "aiosmtpd.handlers.Mailbox", maildir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.fatalf("start aiosmtpd: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			s.fatalf("aiosmtpd did not listen on port %d: %s", port, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.env["SMTP_PORT"] = strconv.Itoa(port)
	s.env["MAILDIR"] = maildir
}

// startWebhookd records every request (method, headers, body) as $WORK/webhook/<n>.txt.
func (s *scriptState) startWebhookd() {
	dir := filepath.Join(s.work, "webhook")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.fatalf("%v", err)
	}
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
	s.t.Cleanup(srv.Close)
	s.env["WEBHOOK_URL"] = srv.URL + "/hook"
}
