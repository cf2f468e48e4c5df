package chamber

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// The inbox watcher lost (issue 23, item 6). systemd leaves a path unit failed for good when
// the service it starts hits its start limit (result unit-start-limit-hit): a few messages
// answered by quick sessions used to reach the default limit (5 starts in 10 s), and every later
// message waited for the next wake while the dashboard said "the inbox watcher is not running".
// The units now carry no start limit (timer.serviceUnit); a watcher stopped or failed all the
// same (by hand, a trigger limit, a unit written by an older build) is found by every wake and
// dead-man check (here, under the lock) and by status and the dashboard (which start the wake
// service, so that this runs): it is started again, the operator is told once, and the messages
// that waited are read.

const (
	toldWatcher = "watcher" // st.Told key: the operator was told of a lost watcher
	// watcherTellEvery bounds the notices of a watcher that keeps getting lost.
	watcherTellEvery = 24 * time.Hour
)

// checkWatcher starts the inbox watcher of an active chamber that watches its inbox again when
// the OS has it installed but not running, tells the operator (once a day at most), and starts
// the wake service when messages wait (a wake merges that start into its own run). Only a lock
// holder calls it.
func (r *runner) checkWatcher(ctx context.Context) {
	if r.unlocked || r.cfg == nil || r.cfg.WatchInbox == nil || !*r.cfg.WatchInbox || !r.st.Phase.Active() || !r.st.Timers.Watch {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*busTimeout)
	defer cancel()
	var why string
	lost := false
	err := r.withBackend(ctx, func(be timer.Backend) error {
		// This chamber's path unit alone: one question to the manager, whatever the number of
		// chambers (listing every installed unit here put the work of all chambers on each wake).
		// "" is a backend that cannot tell (launchd, Slurm): nothing to do. Lost is inactive
		// (stopped, or no unit) or failed (with its result, e.g. unit-start-limit-hit).
		state := timer.WatchState(ctx, be, r.id)
		if !strings.HasPrefix(state, "inactive") && !strings.HasPrefix(state, "failed") {
			return nil
		}
		lost, why = true, state
		return be.Watch(ctx, r.timerChamber(), r.dir+"/"+inboxDir, r.wakeArgv())
	})
	if !lost {
		return // or the manager cannot be asked: the hibernation installs it as always
	}
	unit := timer.SystemdPathName(r.id)
	if why == "" {
		why = "stopped"
	}
	state := "it is on again"
	if err != nil {
		state = fmt.Sprintf("it could not be started again (%v): the next wake tries again", err)
	}
	r.warnf("the inbox watcher %s was not running (%s); %s", unit, why, state)
	if err == nil && r.inboxCount() > 0 {
		if be, berr := r.backend(ctx); berr == nil {
			_ = be.RunNow(ctx, r.id) // the messages that waited: read now
		}
	}
	if last := r.st.Told[toldWatcher]; !last.IsZero() && r.now().Sub(last) < watcherTellEvery {
		return
	}
	r.notify(ctx, r.st.Session, "watcher", fmt.Sprintf("chamber %s: its inbox watcher (%s) was not running (%s), so a message posted without \"wake\" waited for the next wake. %s; the messages waiting (%d) are read now.\n\nIf this comes back, see `systemctl --user status %s` and `journalctl --user -u %s`.",
		r.dir, unit, why, state, r.inboxCount(), unit, unit))
	if r.st.Told == nil {
		r.st.Told = map[string]time.Time{}
	}
	r.st.Told[toldWatcher] = r.now().UTC()
	if err := r.save(); err != nil {
		r.warnf("%v", err)
	}
}

// kickWatcher is what status (and so the dashboard) does when it finds the watcher of an active
// chamber not running: it starts the wake service, whose wake starts the watcher again, tells
// the operator and reads the messages that waited (checkWatcher). It returns what to add to the
// warning.
func (r *runner) kickWatcher(ctx context.Context, be timer.Backend) string {
	if r.st == nil || !r.st.Phase.Active() || !r.st.Timers.Watch || r.cfg == nil || r.cfg.WatchInbox == nil || !*r.cfg.WatchInbox {
		// checkWatcher would do nothing: no wake started for it (a watcher the last hibernation
		// could not install is installed by the next one, as the warning says)
		return ""
	}
	kctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	if err := be.RunNow(kctx, r.id); err != nil {
		return fmt.Sprintf("; the wake that would start it again could not be started: %v", err)
	}
	return "; the wake service was started now: it starts the watcher again and reads the messages waiting"
}
