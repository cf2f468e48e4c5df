package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/internal/program"
	"github.com/cryochamber/cryochamber/internal/sandbox"
)

// DefaultGrace is the delay between SIGTERM and SIGKILL when Run.Grace is zero.
const DefaultGrace = 5 * time.Second

// groupPoll is how often Exec looks whether processes left behind by the agent are gone.
const groupPoll = 20 * time.Millisecond

// Run is one agent process to start.
type Run struct {
	Invocation
	Dir     string        // working directory (the chamber)
	Timeout time.Duration // session_timeout; zero: none. After it the whole process group is killed.
	Grace   time.Duration // SIGTERM → SIGKILL delay, and how long output may stay open after exit (default 5s)
	// Stdout and Stderr receive the agent's output as it is produced, in chunks of at most
	// 32 KiB. Unless they are the same writer, they are written from two goroutines at once: a
	// pair that shares state must synchronize. nil discards the stream. A writer that fails is
	// not written again; the agent keeps running and Result.IOErr reports the failure.
	Stdout, Stderr io.Writer
	// Started, if set, is called once the agent runs, before Exec waits for it, with the
	// identity of its process group. A caller that can die without ending the agent (launchd
	// does not reach the agent's own group when `wake` is killed) records it durably, so that
	// the recovery that follows can end the orphan with EndGroup. Keep it short: the agent's
	// output is not read while it runs.
	Started func(Group)
	// Cage, when set, is the sandbox the program runs in (internal/sandbox): the program is
	// still looked up here, outside, and its resolved path runs inside with the same
	// environment. The process group Exec kills is the sandbox's; the sandbox takes everything
	// inside with it (its PID namespace ends with it).
	Cage *sandbox.Cage
}

// Result is what became of one agent process.
type Result struct {
	ExitCode int    // -1 if killed by a signal or not started
	Signal   string // the signal that ended the agent ("killed", "terminated"); "" if it exited
	TimedOut bool   // Run.Timeout elapsed and the group was killed
	Canceled bool   // the context ended and the group was killed
	Started  bool
	// Lingered: processes the agent started were still in its process group (or held its output
	// open) after it exited. They were terminated, as systemd does with a oneshot service's
	// leftovers, so that nothing of a session outlives it.
	Lingered bool
	Err      error // could not start (not found, permission): the message says what to fix
	IOErr    error // writing Stdout or Stderr failed: output after that point was lost
	Duration time.Duration
}

// NotFoundError is the Result.Err of an agent whose program is not on its PATH.
type NotFoundError struct {
	Program string
	Path    string // the PATH that was searched
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("agent program %q not found in PATH %q: install it, or add its directory "+
		"to the PATH the chamber runs with (captured at start), or give its absolute path", e.Program, e.Path)
}

// Unwrap lets errors.Is(err, exec.ErrNotFound) hold.
func (e *NotFoundError) Unwrap() error { return exec.ErrNotFound }

// Exec runs one agent process in its own process group and streams its output.
//
// The program is looked up on the PATH of r.Env (the environment the agent gets), not on this
// process's PATH. It never runs through a shell. On Timeout or when ctx ends, the whole group
// gets SIGTERM and, Grace later, SIGKILL. After the agent exits, output still held open by its
// children is drained for at most Grace, and whatever is left of the group is terminated the
// same way. A process that leaves the group (setsid) is beyond reach here; under systemd the
// service's control group still catches it.
func Exec(ctx context.Context, r Run) Result {
	res := Result{ExitCode: -1}
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		res.Err = errors.New("agent has no command line: set agent in cryo.toml or a command in [agents.NAME]")
		return res
	}
	if err := ctx.Err(); err != nil {
		res.Canceled = true
		res.Err = fmt.Errorf("agent %q not started: %w", r.Argv[0], err)
		return res
	}
	path, err := lookPath(r.Argv[0], r.Env, r.Dir)
	if err != nil {
		res.Err = err
		return res
	}
	grace := r.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	env := r.Env
	if env == nil {
		env = []string{} // nil would make os/exec hand over our own environment
	}
	if r.Dir != "" {
		// Some agents (opencode) take their project from $PWD, not from their working
		// directory; os/exec does not set it when Env is given, so a stale one would leak in.
		env = dedupEnv(append(append([]string(nil), env...), "PWD="+r.Dir))
	}
	prog, args := path, r.Argv
	if r.Cage != nil {
		prog, args = r.Cage.Wrap(append([]string{path}, r.Argv[1:]...))
	}
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        args,
		Env:         env,
		Dir:         r.Dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		// Bounds the wait for pipes that children keep open after the agent exited.
		WaitDelay: grace,
	}
	if r.Stdin != nil {
		// os/exec copies it through a pipe and closes the pipe at the end: the agent sees EOF.
		cmd.Stdin = bytes.NewReader(r.Stdin)
	}
	var outW, errW *guardWriter
	cmd.Stdout, outW = guard(r.Stdout)
	if sameWriter(r.Stdout, r.Stderr) {
		cmd.Stderr = cmd.Stdout // one pipe, one goroutine: the writer is never called concurrently
	} else {
		cmd.Stderr, errW = guard(r.Stderr)
	}

	start := time.Now()
	// The cage starts it (a nil Cage: cmd.Start): on Linux in a Landlock domain that keeps it
	// from the abstract unix sockets of the shared network (internal/sandbox).
	if err := r.Cage.Start(cmd); err != nil {
		res.Err = startError(prog, err)
		return res
	}
	res.Started = true
	pgid := cmd.Process.Pid
	if r.Started != nil {
		g := Group{PGID: pgid}
		g.Start, _ = procIdentity(pgid) // "" where the OS cannot say: EndGroup then leaves it alone
		r.Started(g)
	}

	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()

	var timeout <-chan time.Time
	if r.Timeout > 0 {
		t := time.NewTimer(r.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	done := ctx.Done()
	var kill <-chan time.Time
	var killTimer *time.Timer
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
	}()
	terminating := false
	terminate := func() {
		if terminating {
			return
		}
		terminating = true
		signalGroup(pgid, syscall.SIGTERM)
		// Also the leader itself, by pidfd where the OS has one: should the group signal fail,
		// Exec must still end.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		killTimer = time.NewTimer(grace)
		kill = killTimer.C
	}

	var werr error
wait:
	for {
		select {
		case werr = <-waitErr:
			break wait
		case <-timeout:
			timeout = nil
			res.TimedOut = true
			terminate()
		case <-done:
			done = nil
			res.Canceled = true
			terminate()
		case <-kill:
			kill = nil
			signalGroup(pgid, syscall.SIGKILL)
			_ = cmd.Process.Kill()
		}
	}
	if errors.Is(werr, exec.ErrWaitDelay) {
		res.Lingered = true
	}
	// The leader is reaped; its group lives on while any member does, so the id is still ours.
	// Leftovers get the same treatment as a timeout: SIGTERM, Grace, SIGKILL.
	if groupAlive(pgid) {
		res.Lingered = true
		terminate() // no-op when already terminating: the SIGKILL deadline stands
		if kill != nil {
			tick := time.NewTicker(groupPoll)
		poll:
			for groupAlive(pgid) {
				select {
				case <-kill:
					break poll
				case <-tick.C:
				}
			}
			tick.Stop()
		}
		signalGroup(pgid, syscall.SIGKILL)
	}
	res.Duration = time.Since(start)

	if ps := cmd.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
		}
	}
	// A cage started without its trial run (sandbox.SetupKnown) that ended in a failure is
	// tried now: if the cage itself cannot start, the session did not run, and it is reported
	// as the trial would have reported it (a *sandbox.Error: the operator is alerted).
	if r.Cage != nil && r.Cage.Unprobed && !res.Canceled && !res.TimedOut && (res.ExitCode != 0 || res.Signal != "") {
		if err := r.Cage.Recheck(ctx); err != nil {
			res.Err = err
		}
	}
	switch {
	case outW != nil && outW.err != nil:
		res.IOErr = fmt.Errorf("agent stdout: %w", outW.err)
	case errW != nil && errW.err != nil:
		res.IOErr = fmt.Errorf("agent stderr: %w", errW.err)
	case werr != nil && !errors.Is(werr, exec.ErrWaitDelay):
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			res.IOErr = fmt.Errorf("agent %q: %w", r.Argv[0], werr)
		}
	}
	return res
}

// lookPath resolves name with the PATH of env (program.Look, the one rule validation uses too),
// and says what to fix when it cannot.
func lookPath(name string, env []string, dir string) (string, error) {
	path, _ := lookupEnv(env, "PATH")
	p, err := program.Look(name, dir, path)
	var nf *program.NotFoundError
	switch {
	case errors.As(err, &nf):
		return "", &NotFoundError{Program: name, Path: path}
	case err != nil && filepath.Base(name) != name:
		return "", fmt.Errorf("agent program %w: fix the path in cryo.toml", err)
	case err != nil:
		return "", fmt.Errorf("agent program %w", err)
	}
	return p, nil
}

func startError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOEXEC):
		return fmt.Errorf("start agent %s: %w (a script needs a #! line)", path, err)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("start agent %s: %w (check its mode and that its file system allows exec)", path, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("start agent %s: %w (the working directory or the #! interpreter is missing)", path, err)
	}
	return fmt.Errorf("start agent %s: %w", path, err)
}

func signalGroup(pgid int, sig syscall.Signal) {
	// ESRCH (nobody left) is the good case; nothing else can be done about other errors here.
	_ = syscall.Kill(-pgid, sig)
}

// groupAlive reports whether any process is left in the group. A child that was killed but not
// yet reaped by its new parent still counts until it is.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// guardWriter passes writes on until the first failure and then swallows them, so that a failing
// writer (a full disk under the log) does not close the pipe and kill the agent with SIGPIPE.
type guardWriter struct {
	w   io.Writer
	err error
}

func (g *guardWriter) Write(p []byte) (int, error) {
	if g.err == nil {
		n, err := g.w.Write(p)
		if err == nil && n < len(p) {
			err = io.ErrShortWrite
		}
		g.err = err
	}
	return len(p), nil
}

// readChunk is how much of the agent's output is read at once (os/exec's own copy reads 32 KiB),
// and pipeSize the capacity asked for the pipe, so that an agent printing fast fills big reads
// and the log gets big writes: fewer system calls per megabyte on both sides.
const (
	readChunk = 1 << 20
	pipeSize  = 1 << 20
)

// ReadFrom is what os/exec's copy from the agent's pipe ends up calling (os.File's WriteTo falls
// back to io.Copy, which prefers the destination's ReaderFrom). It asks the kernel for a larger
// pipe (Linux; silently kept as it is where refused), reads it in readChunk pieces, and reads
// the next piece while the writer (the log: sanitizing, prefixing, writing) handles the last
// one, so that an agent that prints fast is read at the pace of the slower of the two, not of
// both in turn. Two buffers, so at most 2 MiB is held.
func (g *guardWriter) ReadFrom(r io.Reader) (int64, error) {
	growPipe(r, pipeSize)
	type piece struct {
		buf []byte
		n   int
		err error
	}
	full := make(chan piece, 1)
	free := make(chan []byte, 2)
	free <- make([]byte, readChunk)
	free <- make([]byte, readChunk)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-done:
				return
			}
			k, err := r.Read(buf)
			select {
			case full <- piece{buf, k, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var n int64
	for p := range full {
		if p.n > 0 {
			n += int64(p.n)
			_, _ = g.Write(p.buf[:p.n])
		}
		if p.err == io.EOF {
			return n, nil
		}
		if p.err != nil {
			return n, p.err
		}
		free <- p.buf
	}
	return n, nil
}

// guard wraps w for cmd.Stdout/Stderr. Files go to the child as they are (no copy needed).
func guard(w io.Writer) (io.Writer, *guardWriter) {
	switch w := w.(type) {
	case nil:
		return nil, nil
	case *os.File:
		return w, nil
	default:
		g := &guardWriter{w: w}
		return g, g
	}
}

// sameWriter is a == b without the panic for writers of an incomparable type.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a != nil && a == b
}
