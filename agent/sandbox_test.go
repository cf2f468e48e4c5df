package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/sandbox"
)

// sleepers lists the processes of this machine running `sleep <arg>`.
func sleepers(arg string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == "sleep "+arg {
			out = append(out, e.Name())
		}
	}
	return out
}

// Exec's process-group kill reaches everything in the cage: at session_timeout the agent and
// the processes it started (in a session of their own inside: bubblewrap's --new-session) are
// gone, and so is what an agent that exited left behind.
func TestExecCageKillsAll(t *testing.T) {
	tool := e2e.LookPath(t, "bwrap", "bubblewrap")
	if err := sandbox.Probe(context.Background(), tool); err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	dir := t.TempDir()
	cage := &sandbox.Cage{Mechanism: sandbox.Bubblewrap, Tool: tool, Policy: sandbox.Policy{Chamber: dir}}
	run := func(script string, timeout time.Duration) Result {
		return Exec(context.Background(), Run{
			Invocation: Invocation{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}},
			Dir:        dir, Timeout: timeout, Grace: time.Second, Cage: cage,
		})
	}

	res := run("setsid sleep 3101 & sleep 3102 & echo started > started; sleep 3103", time.Second)
	if !res.TimedOut || res.Err != nil {
		t.Fatalf("result %+v, want a timeout", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "started")); err != nil {
		t.Fatalf("the agent did not run in the chamber: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, a := range []string{"3101", "3102", "3103"} {
		for len(sleepers(a)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if p := sleepers(a); len(p) > 0 {
			t.Errorf("sleep %s outlived the timeout: pids %v", a, p)
		}
	}

	res = run("sleep 3104 & echo '[CRYO:EXIT 0] done'", 0)
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("result %+v", res)
	}
	for deadline := time.Now().Add(5 * time.Second); len(sleepers("3104")) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if p := sleepers("3104"); len(p) > 0 {
		t.Errorf("sleep 3104, left behind by an agent that exited, outlived it: pids %v", p)
	}
}

// abstractConnect is the test binary run in a cage by TestExecCageAbstractSockets: it connects
// to the abstract unix socket name (made outside), then to one it makes itself, and says
// which it reached.
func abstractConnect(name string) int {
	out := "outside: "
	if c, err := net.Dial("unix", "@"+name); err == nil {
		c.Close()
		out += "reached"
	} else {
		out += "refused"
	}
	inner := "@" + name + "-inner"
	l, err := net.Listen("unix", inner)
	if err != nil {
		fmt.Println(out, "inner: listen:", err)
		return 1
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	if c, err := net.Dial("unix", inner); err == nil {
		c.Close()
		out += " inner: reached"
	} else {
		out += " inner: refused: " + err.Error()
	}
	fmt.Println(out)
	return 0
}

// The network is shared with the cage (the agent reaches its model API), and with it the
// abstract unix sockets: a session bus on unix:abstract=... (dbus before 1.15 on many systems,
// dbus-launch, a desktop's), X11's @/tmp/.X11-unix/X0. None of them may be reached from inside:
// the user's keyring, D-Bus activation (a service started outside with the environment the
// agent sets), keystrokes into the operator's terminal. Sockets the session makes itself work.
func TestExecCageAbstractSockets(t *testing.T) {
	tool := e2e.LookPath(t, "bwrap", "bubblewrap")
	if err := sandbox.Probe(context.Background(), tool); err != nil {
		e2e.Skipf(t, "bubblewrap cannot run here: %v", err)
	}
	name := fmt.Sprintf("cryo-test-bus-%d", os.Getpid())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cage := &sandbox.Cage{Mechanism: sandbox.Bubblewrap, Tool: tool, Policy: sandbox.Policy{Chamber: dir}}
	var out strings.Builder
	res := Exec(context.Background(), Run{
		Invocation: Invocation{Argv: []string{self}, Env: []string{"PATH=/usr/bin:/bin", "CRYO_TEST_ABSTRACT_CONNECT=" + name}},
		Dir:        dir, Grace: time.Second, Cage: cage, Stdout: &out, Stderr: &out,
	})
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("result %+v: %s", res, out.String())
	}
	if got := strings.TrimSpace(out.String()); got != "outside: refused inner: reached" {
		t.Errorf("in the cage: %q, want the outside socket refused and its own reached", got)
	}
	select {
	case <-accepted:
		t.Errorf("the socket outside accepted a connection from the cage")
	default:
	}
	// The same connection from outside the cage works (the test's listener is sound).
	if c, err := net.Dial("unix", "@"+name); err != nil {
		t.Fatalf("outside: %v", err)
	} else {
		c.Close()
	}
}
