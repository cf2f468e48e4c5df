package sessionlog

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const killEnv = "SESSIONLOG_KILL_CHILD" // "<path>|<session>|<mode>"

// outLine and errLine are what the child writes as line i of each stream; every 40th stdout
// line is long (about 150 KiB) so that writes bigger than one batch and one page happen.
func outLine(i int) string {
	if i%40 == 39 {
		return fmt.Sprintf("out %d %s", i, strings.Repeat("é", 75_000))
	}
	return fmt.Sprintf("out %d %s", i, strings.Repeat("x", i%100))
}

func errLine(i int) string { return fmt.Sprintf("err %d", i) }

// TestMain runs the child process of TestKill when the environment asks for it: a helper
// process, not a test (as a test it would show as a skip in every run).
func TestMain(m *testing.M) {
	if arg := os.Getenv(killEnv); arg != "" {
		killChild(arg)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// killChild writes a block until it is killed.
func killChild(arg string) {
	f := strings.Split(arg, "|")
	n, _ := strconv.Atoi(f[1])
	b, err := Begin(f[0], n, at(n), []string{"task: be killed", "command: test"})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	if f[2] == "end" {
		fmt.Fprintln(b.Stdout(), outLine(0))
		b.End(at(n).Add(time.Minute), 0, "")
	}
	fmt.Println("ready") // the parent kills us from here on
	if f[2] != "stream" {
		for {
			time.Sleep(time.Hour) // (select {} would be a deadlock outside a test)
		}
	}
	for i := 0; ; i++ {
		fmt.Fprintln(b.Stdout(), outLine(i))
		if i%3 == 0 {
			// Written in two pieces: a kill between them leaves a partial line in memory only.
			fmt.Fprint(b.Stderr(), "err ")
			fmt.Fprintln(b.Stderr(), strconv.Itoa(i/3))
		}
	}
}

// TestKill SIGKILLs a child writing a block at several points; afterwards Latest reports the
// block torn, CloseTorn closes it, and Latest, Find and Each work on every block so far.
func TestKill(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := t.TempDir() + "/cryo.log"
	points := []struct {
		mode  string
		after int64 // bytes of log written by the child before the kill
	}{
		{"header", 0}, {"stream", 1}, {"stream", 50_000}, {"stream", 600_000}, {"end", 0}, {"stream", 3_000_000},
	}
	for i, pt := range points {
		n := i + 1
		before := fileSize(t, p)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%s", killEnv, p, n, pt.mode))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child %d said %q, %v", n, line, err)
		}
		for j := 0; j < 20000 && fileSize(t, p)-before < pt.after; j++ {
			time.Sleep(100 * time.Microsecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		info, err := Latest(p, before)
		if err != nil {
			t.Fatalf("point %d (%s after %d bytes): Latest: %v", n, pt.mode, pt.after, err)
		}
		if info.Session != n || info.Offset != before {
			t.Fatalf("point %d: Latest = %+v, want session %d at %d", n, info, n, before)
		}
		ls := checkInfo(t, p, info)
		checkKilledLines(t, n, ls)
		if pt.mode == "end" {
			if info.End == nil || info.End.Exit != 0 {
				t.Fatalf("point %d: a block closed before the kill reads %+v", n, info.End)
			}
			continue
		}
		if info.End != nil {
			t.Fatalf("point %d: a killed block has an END line: %+v", n, info.End)
		}
		closed, err := CloseTorn(p, at(n).Add(time.Hour))
		if err != nil || closed == nil || closed.End.Reason != "crashed" {
			t.Fatalf("point %d: CloseTorn = %+v, %v", n, closed, err)
		}
		t.Logf("point %d: killed after %d bytes, %d lines, last line %v", n, closed.Size, closed.Lines, ls[len(ls)-1].Kind)
		for m := 1; m <= n; m++ {
			info, err := Find(p, m)
			if err != nil || info.End == nil {
				t.Fatalf("point %d: Find(%d) = %+v, %v", n, m, info, err)
			}
			checkKilledLines(t, m, checkInfo(t, p, info))
		}
		if again, err := Latest(p, -1); err != nil || again.Lines != closed.Lines || again.Size != closed.Size {
			t.Fatalf("point %d: Latest after CloseTorn = %+v, %v; CloseTorn said %+v", n, again, err, closed)
		}
	}
}

// checkKilledLines checks that the lines of a killed block are the child's lines in order, with
// at most the last output line torn.
func checkKilledLines(t *testing.T, n int, ls []Line) {
	t.Helper()
	var out, errs int
	for i, l := range ls {
		switch l.Kind {
		case Stdout:
			if l.Text != outLine(out) {
				t.Fatalf("block %d line %d: %.40q, want %.40q", n, l.N, l.Text, outLine(out))
			}
			out++
		case Stderr:
			if l.Text != errLine(errs) {
				t.Fatalf("block %d line %d: %q, want %q", n, l.N, l.Text, errLine(errs))
			}
			errs++
		case Torn:
			// A write cut by the kill: only the last output line, completed by CloseTorn.
			if i+1 < len(ls) && ls[i+1].Kind != Meta && ls[i+1].Kind != End {
				t.Fatalf("block %d: torn line %d is not at the end", n, l.N)
			}
			if !strings.HasPrefix("| "+outLine(out), l.Text) && !strings.HasPrefix("! "+errLine(errs), l.Text) &&
				!strings.HasPrefix(l.Text, "| out ") {
				t.Fatalf("block %d: torn line %.60q is no prefix of the next line", n, l.Text)
			}
		}
	}
}

func fileSize(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
