package chamber

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// PrivateDir is the chamber's private runtime directory (lock, prompt, environment file).
const PrivateDir = ".cryo"

// LockFile is the lock inside PrivateDir. It is created once and never replaced or removed:
// replacing it would let two processes hold locks on two different files.
const LockFile = "lock"

// ErrLocked means another live process holds the chamber's lock.
var ErrLocked = errors.New("chamber is locked by another process")

// Lock is a held flock(2) on the chamber's lock file. The kernel releases it when the process
// dies, however it dies, so a lock can never outlive its holder.
type Lock struct {
	f *os.File
}

// TryLock takes the chamber's lock without waiting. It returns ErrLocked when another process
// holds it.
func TryLock(dir string) (*Lock, error) {
	if err := ensurePrivateDir(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, PrivateDir, LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock. Safe to call twice.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}

// ensurePrivateDir creates .cryo with mode 0700 and repairs a looser mode: it holds the
// environment file, which may carry secrets.
func ensurePrivateDir(dir string) error {
	p := filepath.Join(dir, PrivateDir)
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", p)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}
