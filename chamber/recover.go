package chamber

import (
	"context"
	"errors"
	"fmt"

	"github.com/cryochamber/cryochamber/agent"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/sessionlog"
)

// recover finishes what a process that died holding the lock left behind. recovered is true
// when it did something that ends this command (it hibernated or ran a session).
func (r *runner) recover(ctx context.Context) (bool, error) {
	if r.st.Phase != PhaseRunning {
		// Died after saving a finished state but before clearing the holder: harmless.
		r.st.Holder = nil
		return false, nil
	}
	n := r.st.Session
	f := &finishing{n: n, why: r.st.Reason, due: r.st.Wake}
	if h := r.st.Holder; h != nil && h.Agent != nil {
		// The process that died may have left its agent running: end it before anything
		// else runs, so that no session runs beside an orphan. (The group comes from
		// agent.json, laid over the state by load, or from an older build's state.json.)
		if ended, err := agent.EndGroup(*h.Agent, agent.DefaultGrace); err != nil {
			r.warnf("cannot end the agent that session %d left running (process group %d): %v", n, h.Agent.PGID, err)
		} else if ended {
			r.printf("recovering: ended the agent that session %d left running (process group %d)", n, h.Agent.PGID)
			r.logNote(fmt.Sprintf("recovery ended the agent session %d left running (process group %d)", n, h.Agent.PGID))
		}
		h.Agent = nil
	}
	info, cb, err := r.latestBlock()
	var ce *sessionlog.CorruptError
	if errors.As(err, &ce) || errors.Is(err, confined.ErrNotRegular) {
		r.checkLog(r.now())
		info, err = nil, nil
	}
	if err != nil && !errors.Is(err, sessionlog.ErrNoBlocks) {
		return true, &Error{Msg: "cannot read cryo.log to recover session " + fmt.Sprint(n), Err: err,
			Hint: "check that cryo.log is readable; `cryochamber status --dir " + r.dir + "` shows the state"}
	}
	due := r.now()
	if r.st.Wake != nil {
		due = *r.st.Wake
	}
	if info == nil || info.Session < n {
		// The session was claimed but its block never started: run it now, with its claims.
		r.printf("recovering: session %d was claimed but never started; running it now", n)
		return true, r.runSession(ctx, n, due, r.st.Reason)
	}
	if info.Session > n {
		return true, &Error{Msg: fmt.Sprintf("cryo.log holds session %d but the state says session %d: they disagree", info.Session, n),
			Hint: "inspect cryo.log; `cryochamber cancel --dir " + r.dir + "` then `start` begins again with the next number"}
	}
	m, err := r.markersOf(info, cb)
	if err != nil {
		return true, err
	}
	if info.End == nil {
		closed, err := sessionlog.CloseTorn(r.logPath(), r.now())
		if err != nil {
			return true, &Error{Msg: "cannot close the crashed session in cryo.log", Err: err}
		}
		end := r.now()
		if closed != nil && closed.End != nil {
			end = closed.End.End
		}
		r.printf("recovering: session %d crashed (its process died); closed its block as failed", n)
		f.m, f.o = m, outcome{start: info.Start, end: end, exit: 2, reason: EndCrashed, detail: "the session's process died before it finished"}
		r.snapshotRecovered(ctx, f) // snapshot.go
		return true, r.retry(ctx, f)
	}
	r.printf("recovering: session %d finished but did not hibernate; finishing now", n)
	f.m, f.o = m, outcome{start: info.Start, end: info.End.End, exit: info.End.Exit, reason: Ending(info.End.Reason)}
	r.snapshotRecovered(ctx, f) // snapshot.go
	return true, r.afterSession(ctx, f, info.End.End)
}

// blockMarkers parses the markers of a block from the log (the recovery and validate paths;
// a live session parses while it streams).
func (r *runner) blockMarkers(info *sessionlog.Info) (*marker.Result, error) {
	p := marker.NewParser(r.cfg.Location)
	err := sessionlog.Each(r.logPath(), info, func(l sessionlog.Line) error {
		if l.Kind == sessionlog.Stdout {
			p.Line(l.N, l.Text)
		}
		return nil
	})
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("cannot read session %d from cryo.log", info.Session), Err: err}
	}
	return p.Result(), nil
}
