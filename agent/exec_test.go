package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const testPath = "PATH=/usr/bin:/bin"

// script writes an executable sh script into dir and returns its path.
func script(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a bytes.Buffer safe for the two output goroutines, and a hook on every write.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	onLine func(line string)
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.onLine != nil {
		for _, l := range strings.Split(string(p), "\n") {
			b.onLine(l)
		}
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gone reports whether pid has exited (a zombie not yet reaped by its new parent counts).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// readPID reads the PID a script wrote, and makes sure the test ends that process whatever
// happens to the assertions.
func readPID(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the script did not record its background PID: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("bad PID %q in %s", b, file)
	}
	t.Cleanup(func() {
		if !gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// assertGone waits (bounded) for a SIGKILLed process to be reported dead.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	for range 500 {
		if gone(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("process %d outlived the agent's process group", pid)
}

func run(argv ...string) Run {
	return Run{Invocation: Invocation{Argv: argv, Env: []string{testPath}}, Grace: 2 * time.Second}
}

// The agent blocks until the test has seen its first line: the output arrives while the
// process runs, not when it exits. Without streaming this would end in the timeout.
func TestExecStreamsBeforeExit(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "seen")
	agent := script(t, dir, "agent", `echo one
echo err-one >&2
while [ ! -e "$1" ]; do sleep 0.01; done
echo two
`)
	var stdout syncBuffer
	stdout.onLine = func(l string) {
		if l == "one" {
			if err := os.WriteFile(flag, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	var stderr syncBuffer
	r := run(agent, flag)
	r.Stdout, r.Stderr = &stdout, &stderr
	r.Timeout = 30 * time.Second
	res := Exec(context.Background(), r)
	if res.TimedOut || res.ExitCode != 0 || !res.Started || res.Err != nil {
		t.Fatalf("Exec = %+v: output did not stream before exit", res)
	}
	if got := stdout.String(); got != "one\ntwo\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := stderr.String(); got != "err-one\n" {
		t.Errorf("stderr = %q", got)
	}
}

func TestExecOutputInOrder(t *testing.T) {
	dir := t.TempDir()
	agent := script(t, dir, "agent", `i=0
while [ $i -lt 5000 ]; do echo "line $i"; i=$((i+1)); done
`)
	var out syncBuffer
	r := run(agent)
	r.Stdout = &out
	res := Exec(context.Background(), r)
	if res.ExitCode != 0 {
		t.Fatalf("Exec = %+v", res)
	}
	var want strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if out.String() != want.String() {
		t.Errorf("stdout out of order or incomplete: got %d bytes, want %d", len(out.String()), want.Len())
	}
}

func TestExecExitCodes(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		body     string
		code     int
		signal   string
		lingered bool
	}{
		{"exit 0\n", 0, "", false},
		{"exit 1\n", 1, "", false},
		{"exit 2\n", 2, "", false},
		{"exit 77\n", 77, "", false},
		{"kill -TERM $$\n", -1, "terminated", false},
		{"kill -KILL $$\n", -1, "killed", false},
	}
	for i, tt := range tests {
		t.Run(strings.TrimSpace(tt.body), func(t *testing.T) {
			res := Exec(context.Background(), run(script(t, dir, fmt.Sprint("a", i), tt.body)))
			if res.ExitCode != tt.code || res.Signal != tt.signal || res.Lingered != tt.lingered ||
				!res.Started || res.TimedOut || res.Canceled || res.Err != nil || res.IOErr != nil {
				t.Errorf("Exec = %+v, want exit %d signal %q", res, tt.code, tt.signal)
			}
		})
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		signal string
	}{
		// SIGTERM ends both the agent and its background child.
		{"term", `sleep 1000 &
echo $! > "$1"
wait
`, "terminated"},
		// Everything ignores SIGTERM: SIGKILL after Grace.
		{"kill", `trap '' TERM
sleep 1000 &
echo $! > "$1"
while :; do wait; done
`, "killed"},
		// The agent dies on SIGTERM, the child ignores it and holds stdout open.
		{"child ignores term", `(trap '' TERM; exec sleep 1000) &
echo $! > "$1"
wait
`, "terminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			agent := script(t, dir, "agent", tt.body)
			r := run(agent, pidFile)
			r.Timeout = 500 * time.Millisecond
			r.Grace = 300 * time.Millisecond
			r.Stdout, r.Stderr = io.Discard, io.Discard
			res := Exec(context.Background(), r)
			pid := readPID(t, pidFile)
			if !res.TimedOut || res.Canceled || res.ExitCode != -1 || res.Signal != tt.signal {
				t.Errorf("Exec = %+v, want TimedOut, exit -1, signal %q", res, tt.signal)
			}
			assertGone(t, pid)
		})
	}
}

func TestExecCancel(t *testing.T) {
	dir := t.TempDir()
	agent := script(t, dir, "agent", `sleep 1000 &
echo $! > "$1"
echo started
wait
`)
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{onLine: func(l string) {
		if l == "started" {
			cancel()
		}
	}}
	r := run(agent, pidFile)
	r.Stdout = out
	r.Grace = 300 * time.Millisecond
	res := Exec(ctx, r)
	if !res.Canceled || res.TimedOut || res.Signal != "terminated" {
		t.Errorf("Exec = %+v, want Canceled, signal terminated", res)
	}
	assertGone(t, readPID(t, pidFile))

	res = Exec(ctx, run(agent, pidFile))
	if res.Started || !res.Canceled || res.Err == nil || !strings.Contains(res.Err.Error(), "not started") {
		t.Errorf("Exec with a done context = %+v, want not started", res)
	}
}

// A child that keeps the agent's stdout open must not hang Exec, and leftovers are ended.
func TestExecLeftovers(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"holds stdout", `sleep 1000 &
echo $! > "$1"
exit 3
`},
		{"holds stderr only", `sleep 1000 >/dev/null &
echo $! > "$1"
exit 3
`},
		{"detached output", `sleep 1000 >/dev/null 2>&1 &
echo $! > "$1"
exit 3
`},
		{"detached and ignores term", `(trap '' TERM; exec sleep 1000) >/dev/null 2>&1 &
echo $! > "$1"
exit 3
`},
		{"holds stdout and ignores term", `(trap '' TERM; exec sleep 1000) &
echo $! > "$1"
exit 3
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			r := run(script(t, dir, "agent", tt.body), pidFile)
			r.Grace = 200 * time.Millisecond
			r.Timeout = time.Minute // would be the only way out if Exec waited for the pipe
			var out, errOut syncBuffer
			r.Stdout, r.Stderr = &out, &errOut
			res := Exec(context.Background(), r)
			pid := readPID(t, pidFile)
			if res.ExitCode != 3 || res.TimedOut || !res.Lingered || res.Signal != "" {
				t.Errorf("Exec = %+v, want exit 3, Lingered, not timed out", res)
			}
			assertGone(t, pid)
		})
	}
}

func TestExecStartErrors(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, bin, "works", "exit 0\n")
	if err := os.WriteFile(filepath.Join(bin, "noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "noshebang"), []byte("echo hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(bin, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	binPath := "PATH=relative:" + bin + ":/nonexistent"
	tests := []struct {
		name string
		argv []string
		env  []string
		dir  string
		want []string
	}{
		{"not on PATH", []string{"no-such-agent-xyz"}, []string{binPath}, "",
			[]string{`agent program "no-such-agent-xyz" not found in PATH`, bin, "/nonexistent"}},
		{"no PATH at all", []string{"opencode"}, nil, "", []string{`"opencode" not found in PATH ""`}},
		{"last PATH wins", []string{"works"}, []string{binPath, "PATH=/nonexistent"}, "",
			[]string{`"works" not found in PATH "/nonexistent"`}},
		{"not executable", []string{"noexec"}, []string{binPath}, "", []string{"noexec", "not executable", "chmod +x"}},
		{"directory on PATH", []string{"adir"}, []string{binPath}, "", []string{"adir", "is a directory"}},
		{"absolute path missing", []string{filepath.Join(dir, "gone")}, nil, "", []string{"gone", "does not exist"}},
		{"relative path resolved in Dir", []string{"./bin/noexec"}, nil, dir, []string{filepath.Join(bin, "noexec"), "not executable"}},
		{"no shebang", []string{"noshebang"}, []string{binPath}, "", []string{"noshebang", "#! line"}},
		{"empty argv", nil, nil, "", []string{"no command line"}},
		{"missing working directory", []string{"works"}, []string{binPath}, filepath.Join(dir, "nodir"), []string{"working directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Exec(context.Background(), Run{Invocation: Invocation{Argv: tt.argv, Env: tt.env}, Dir: tt.dir})
			if res.Started || res.ExitCode != -1 || res.Err == nil {
				t.Fatalf("Exec = %+v, want not started with an error", res)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Err.Error(), w) {
					t.Errorf("error %q does not mention %q", res.Err, w)
				}
			}
		})
	}
	res := Exec(context.Background(), Run{Invocation: Invocation{Argv: []string{"nope"}, Env: []string{binPath}}})
	if !errors.Is(res.Err, exec.ErrNotFound) {
		t.Errorf("not found error %v is not exec.ErrNotFound", res.Err)
	}
}

// The program resolves on the agent's PATH, runs in Dir, and sees only the environment given.
func TestExecEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, bin, "my-agent", `pwd
echo "dir=$CRYO_DIR session=$CRYO_SESSION file=$CRYO_PROMPT_FILE home=$HOME"
echo "args=$*"
`)
	spec := Spec{Command: []string{"my-agent", "--flag"}}
	inv := spec.Invocation("the prompt", []string{"PATH=" + bin + ":/usr/bin:/bin"}, Vars{Dir: dir, Session: 4, PromptFile: "/p"})
	var out syncBuffer
	res := Exec(context.Background(), Run{Invocation: inv, Dir: dir, Stdout: &out})
	if res.ExitCode != 0 {
		t.Fatalf("Exec = %+v", res)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := real + "\ndir=" + dir + " session=4 file=/p home=\nargs=--flag the prompt\n"
	if got := out.String(); got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

func TestExecStdin(t *testing.T) {
	big := make([]byte, 300<<10)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		stdin []byte
	}{
		{"nil is /dev/null", nil},
		{"empty", []byte{}},
		{"small", []byte("hello\n")},
		{"300 KB binary", big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// cat ends only when its stdin is closed.
			var out bytes.Buffer
			r := run("cat")
			r.Stdin = tt.stdin
			r.Stdout = &out
			r.Timeout = time.Minute
			res := Exec(context.Background(), r)
			if res.ExitCode != 0 || res.TimedOut {
				t.Fatalf("Exec = %+v: stdin was not closed", res)
			}
			if !bytes.Equal(out.Bytes(), tt.stdin) {
				t.Errorf("cat returned %d bytes, want the %d sent", out.Len(), len(tt.stdin))
			}
		})
	}
	// An agent that never reads its stdin still exits cleanly.
	r := run("true")
	r.Stdin = big
	if res := Exec(context.Background(), r); res.ExitCode != 0 || res.IOErr != nil {
		t.Errorf("Exec(true) with unread stdin = %+v", res)
	}
}

type failWriter struct{ calls atomic.Int32 }

func (f *failWriter) Write(p []byte) (int, error) {
	f.calls.Add(1)
	return 0, errors.New("disk full")
}

// A writer that fails does not kill the agent (no SIGPIPE): it runs on, and the failure is reported.
func TestExecWriterFails(t *testing.T) {
	dir := t.TempDir()
	doneFile := filepath.Join(dir, "done")
	// head dies of SIGPIPE (status 141) if the pipe is closed under it.
	agent := script(t, dir, "agent", `head -c 1000000 /dev/zero || exit 9
echo finished > "$1"
`)
	fw := &failWriter{}
	r := run(agent, doneFile)
	r.Stdout = fw
	res := Exec(context.Background(), r)
	if res.ExitCode != 0 || res.Signal != "" {
		t.Errorf("Exec = %+v, want the agent to finish", res)
	}
	if res.IOErr == nil || !strings.Contains(res.IOErr.Error(), "agent stdout: disk full") {
		t.Errorf("IOErr = %v, want agent stdout: disk full", res.IOErr)
	}
	if n := fw.calls.Load(); n != 1 {
		t.Errorf("failed writer called %d times, want 1", n)
	}
	if _, err := os.Stat(doneFile); err != nil {
		t.Errorf("agent did not run to the end: %v", err)
	}
}

// overlapWriter fails the test if Write is entered by two goroutines at once.
type overlapWriter struct {
	t      *testing.T
	inside atomic.Int32
	buf    bytes.Buffer
}

func (w *overlapWriter) Write(p []byte) (int, error) {
	if w.inside.Add(1) != 1 {
		w.t.Error("Write called concurrently for one writer")
	}
	time.Sleep(50 * time.Microsecond) // widen the window a concurrent call would hit
	w.buf.Write(p)
	w.inside.Add(-1)
	return len(p), nil
}

func TestExecSameWriterNotConcurrent(t *testing.T) {
	dir := t.TempDir()
	agent := script(t, dir, "agent", `i=0
while [ $i -lt 300 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done
`)
	w := &overlapWriter{t: t}
	r := run(agent)
	r.Stdout, r.Stderr = w, w
	if res := Exec(context.Background(), r); res.ExitCode != 0 {
		t.Fatalf("Exec = %+v", res)
	}
	if got := strings.Count(w.buf.String(), "\n"); got != 600 {
		t.Errorf("got %d lines, want 600", got)
	}
}

func BenchmarkExec(b *testing.B) {
	const size = 100 << 20
	agent := script(b, b.TempDir(), "agent", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x\n", size))
	r := run(agent)
	r.Stdout = struct{ io.Writer }{io.Discard} // not an *os.File: through the streaming copy
	b.SetBytes(size)
	for b.Loop() {
		if res := Exec(context.Background(), r); res.ExitCode != 0 {
			b.Fatalf("Exec = %+v", res)
		}
	}
}

// sizeWriter records the size of every write; its first write waits until the agent has
// finished writing, so that the pipe is full when the next read comes.
type sizeWriter struct {
	mu    sync.Mutex
	sizes []int
	total int
	first func()
}

func (w *sizeWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first != nil {
		w.first()
		w.first = nil
	}
	w.sizes = append(w.sizes, len(p))
	w.total += len(p)
	return len(p), nil
}

// The agent's output is read in pieces larger than os/exec's 32 KiB and the default 64 KiB
// pipe: Exec's writer is a ReaderFrom that os/exec's copy calls, and the pipe is grown (Linux).
func TestExecReadsInLargePieces(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("F_SETPIPE_SZ is Linux's")
	}
	dir := t.TempDir()
	wrote := filepath.Join(dir, "wrote")
	// One byte first (the reader's first write waits in it), then 1 MiB in one go.
	agent := script(t, dir, "agent", `printf x; head -c 1048576 /dev/zero | tr '\0' y; echo done > "$1"; sleep 0.2
`)
	w := &sizeWriter{}
	w.first = func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(wrote); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	r := run(agent, wrote)
	r.Stdout = w
	res := Exec(context.Background(), r)
	if res.ExitCode != 0 || res.IOErr != nil {
		t.Fatalf("Exec = %+v", res)
	}
	if w.total != 1+1<<20 {
		t.Fatalf("read %d bytes, want %d", w.total, 1+1<<20)
	}
	big := 0
	for _, n := range w.sizes {
		big = max(big, n)
	}
	if big <= 64<<10 {
		t.Errorf("largest read %d bytes (reads %v): want more than a default pipe holds", big, w.sizes)
	}
}
