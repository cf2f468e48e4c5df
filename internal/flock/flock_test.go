package flock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestTryHeldUnlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	if Held(p) {
		t.Fatal("Held on a missing file")
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("Held created the file: %v", err)
	}
	l, err := Try(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", fi, err)
	}
	// flock belongs to the open file description: a second open in this process is refused as
	// another process would be.
	if _, err := Try(p); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Try = %v, want ErrBusy", err)
	}
	if !Held(p) {
		t.Fatal("Held = false while held")
	}
	l.Unlock()
	l.Unlock() // twice is fine
	var nl *Lock
	nl.Unlock()
	if Held(p) {
		t.Fatal("Held after Unlock")
	}
	l2, err := Wait(p)
	if err != nil {
		t.Fatal(err)
	}
	l2.Unlock()
}

func TestWaitTakesTheLockWhenReleased(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	l, err := Try(p)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() {
		w, err := Wait(p)
		if err == nil && Held(p) {
			w.Unlock()
		}
		got <- err
	}()
	l.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrorIsSaid(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing", "lock")
	if _, err := Try(p); err == nil || errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "open lock") {
		t.Fatalf("Try in a missing directory = %v", err)
	}
}

// TestKilledHolderReleases: a process killed with SIGKILL while it holds the lock leaves it
// free; nothing needs cleaning up.
func TestKilledHolderReleases(t *testing.T) {
	if p := os.Getenv("FLOCK_TEST_HOLD"); p != "" {
		if _, err := Try(p); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		select {}
	}
	p := filepath.Join(t.TempDir(), "lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHolderReleases$")
	cmd.Env = append(os.Environ(), "FLOCK_TEST_HOLD="+p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		cmd.Process.Kill()
		t.Fatalf("holder said %q, %v", buf, err)
	}
	if _, err := Try(p); !errors.Is(err, ErrBusy) {
		t.Fatalf("Try while another process holds it = %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l, err := Try(p)
	if err != nil {
		t.Fatalf("Try after the holder was killed = %v", err)
	}
	l.Unlock()
}
