// Package flock holds the advisory locks of cryochamber's private state directory: flock(2) on
// a lock file that is never removed. The kernel releases a lock when the process that holds it
// dies, however it dies, so a lock never outlives its holder and needs no cleanup.
//
// It is the one place that calls flock. It never locks a file in the chamber: the agent could
// replace such a file, or hold the lock itself.
package flock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrBusy means another open file description (another process, as we use it) holds the lock.
var ErrBusy = errors.New("held by another process")

// Lock is a held exclusive lock.
type Lock struct {
	f *os.File
}

// Try takes the exclusive lock on path, creating the file with mode 0600, without waiting:
// ErrBusy when it is held.
func Try(path string) (*Lock, error) {
	return take(path, syscall.LOCK_EX|syscall.LOCK_NB)
}

// Wait takes the exclusive lock on path, creating the file with mode 0600, waiting for as long
// as it is held. Only for locks held for an instant (a registry update).
func Wait(path string) (*Lock, error) {
	return take(path, syscall.LOCK_EX)
}

func take(path string, how int) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := call(f, how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrBusy
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Held reports whether some process holds the exclusive lock on path. It asks with a shared
// lock that it lets go at once, and creates nothing: a missing file is a lock nobody holds. A
// holder that starts in that instant finds the lock busy, as if it had come a moment later.
func Held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	err = call(f, syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		_ = call(f, syscall.LOCK_UN)
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// Unlock releases the lock. Safe to call twice, and on a nil Lock.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = call(l.f, syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// call is flock(2), retried when a signal interrupts it.
func call(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
