package chamber

import (
	"context"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// Arming a session's dead-man beside the checks before its session (issue 28). The D-Bus jobs
// of the arming (stop the old timer, create the new one, each waited for) took their turn
// before the log and the chamber were checked and the chamber snapshotted; now they run while
// those are, and the session waits for them (joinDeadman) before its SESSION line, where the
// dead-man was always armed: a wake killed at the header or later leaves the session's
// dead-man in the OS (TestDeadmanArmedBeforeTheAgent; joined later, at the agent's start, a
// kill at the header could find the old timer stopped and the new one not yet created). The
// moment without a dead-man is the one there always was, between the stop and the creation.

// startDeadman begins arming the dead-man of a session starting at start, in the background;
// joinDeadman waits for it and records it. The background part touches nothing of the runner:
// it works on a connection of its own when the runner has none yet, handed over at the join.
// What it could not do because the bus dropped is done again at the join by armDeadman, with
// its retries; a refusal or a timeout is warned about, as armDeadman warns.
func (r *runner) startDeadman(ctx context.Context, start time.Time) {
	at := ceilSecond(start.Add(r.cfg.FallbackAfter.D)).UTC()
	job := timer.Job{Kind: timer.Fallback, At: at, Argv: r.fallbackArgv()} // first: it re-pins (repin.go)
	var kept *time.Time
	if f := r.st.Timers.Fallback; f != nil && !f.After(at) && !f.Before(start) && !r.repinChanged {
		// The plan's dead-man, due first, guards the session too, unless it was armed with
		// the copy a re-pin just replaced (it may not read the state this build writes).
		t := *f
		kept = &t
	}
	ch := r.timerChamber()
	id := r.id
	be := r.be
	name := r.cfg.Backend
	if name == "" {
		name = r.st.Backend
	}
	open := r.env.OpenBackend
	type result struct {
		be     timer.Backend // opened here, for the runner to keep
		kept   bool          // the plan's dead-man comes first and the OS has it
		err    error
		closed bool // the arming timed out: the connection was dropped
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() { done <- res }()
		ctx, cancel := context.WithTimeout(ctx, deadmanArmTimeout)
		defer cancel()
		if be == nil {
			cctx, ccancel := context.WithTimeout(ctx, connectTimeout)
			b, err := open(cctx, name)
			ccancel()
			if err != nil {
				res.err = err
				return
			}
			be, res.be = b, b
		}
		if kept != nil {
			if v, err := timer.Check(ctx, be, id, timer.Fallback, *kept); err == nil && v.Found && v.OK {
				res.kept = true
				return
			}
		}
		res.err = be.Arm(ctx, ch, job)
		if ctx.Err() != nil {
			res.closed = true
		}
	}()
	r.deadmanJoin = func() {
		res := <-done
		if res.be != nil {
			if r.be == nil && !res.closed {
				r.be = res.be
				r.st.Backend = res.be.Name()
			} else {
				_ = res.be.Close()
			}
		} else if res.closed {
			r.closeBackend()
		}
		switch {
		case res.kept:
		case res.err == nil:
			r.st.Timers.Fallback = &at
		case transientBusError(res.err) && !res.closed:
			// A bus that dropped or restarted: armDeadman dials again, as withBackend would
			// have, and warns if it still cannot.
			r.armDeadman(ctx, start)
		default:
			// A refusal, or a manager that did not answer in time: asking again would only
			// hold the session back as long again (armDeadman's own answer to both).
			r.warnf("cannot arm the dead-man timer for this session: %v", res.err)
		}
	}
}

// joinDeadman waits for the dead-man that startDeadman began to arm, and records it. It is
// called before the SESSION line, and before anything else uses the timer manager.
func (r *runner) joinDeadman() {
	if j := r.deadmanJoin; j != nil {
		r.deadmanJoin = nil
		j()
	}
}
