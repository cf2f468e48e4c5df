package flock

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestWaitForGivesUp: a lock held (by a holder that does not let go: a command stopped with
// Ctrl-Z) is given up after the bound with ErrBusy; one released while waiting is taken.
func TestWaitForGivesUp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	held, err := Try(p)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := WaitFor(p, 50*time.Millisecond); !errors.Is(err, ErrBusy) {
		l.Unlock()
		t.Fatalf("WaitFor on a held lock = %v, want ErrBusy", err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		held.Unlock()
	}()
	l, err := WaitFor(p, time.Minute)
	if err != nil {
		t.Fatalf("WaitFor after the holder let go: %v", err)
	}
	l.Unlock()
}
