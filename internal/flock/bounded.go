package flock

import (
	"errors"
	"time"
)

// WaitFor takes the exclusive lock on path like Wait, but gives up after d with ErrBusy. For a
// lock whose holder may be stopped in the instant it holds it (a command suspended with Ctrl-Z):
// the caller must not wait for it without limit, and has something safe to do instead.
func WaitFor(path string, d time.Duration) (*Lock, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	step := 5 * time.Millisecond
	for {
		l, err := Try(path)
		if !errors.Is(err, ErrBusy) {
			return l, err
		}
		pause := time.NewTimer(step)
		select {
		case <-deadline.C:
			pause.Stop()
			return nil, ErrBusy
		case <-pause.C:
		}
		if step < 100*time.Millisecond {
			step *= 2
		}
	}
}
