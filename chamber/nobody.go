package chamber

import (
	"context"
	"fmt"
	"time"

	"github.com/cryochamber/cryochamber/internal/heartbeat"
	"github.com/cryochamber/cryochamber/internal/termtext"
)

// When every alert target fails (targets.go: status and ps say "NO ALERT REACHES ANYONE"), the
// ways that do not go through those targets say it too (issue 23, item 12, its second half):
// the digest says it at its top (digest.go), and the heartbeat monitor, which alerts the
// operator by its own channels, gets `/fail` with that reason: at once from the lock holder that
// finds it (once, until a target works again), and instead of a success at every session's end
// while it lasts. None of this ever holds up a session: the pings keep their deadlines.

const toldNobody = "nobody" // st.Told key: the monitor was told that no alert reaches anyone

// nobodyReason is the one line said when no alert reaches anyone, "" while some target works.
func (r *runner) nobodyReason() string {
	failing := r.failingTargets()
	if !r.reachNobody(failing) {
		return ""
	}
	return termtext.OneLine(failingText(failing, true), 400)
}

// tellHeartbeatNobody pings the monitor's /fail, once, when no alert reaches anyone; it forgets
// that it told when a target works again. Only a lock holder calls it.
func (r *runner) tellHeartbeatNobody(ctx context.Context, nobody bool, reason string) {
	h := r.cfg.Heartbeat
	if !nobody {
		if !r.st.Told[toldNobody].IsZero() {
			delete(r.st.Told, toldNobody)
			if err := r.save(); err != nil {
				r.warnf("%v", err)
			}
		}
		return
	}
	if h == nil || h.URL == "" || !r.st.Told[toldNobody].IsZero() {
		return
	}
	err := r.heartbeatClient(endPingDeadline).Ping(ctx, h.URL, heartbeat.Fail, fmt.Sprintf("chamber %s: %s", r.dir, reason))
	r.noteHeartbeat(string(heartbeat.Fail), err, func(rec *HeartbeatRecord) {
		if err == nil {
			t := r.now().UTC()
			rec.LastPing = &t
		}
	})
	if err != nil {
		return // told at the next try
	}
	if r.st.Told == nil {
		r.st.Told = map[string]time.Time{}
	}
	r.st.Told[toldNobody] = r.now().UTC()
	if err := r.save(); err != nil {
		r.warnf("%v", err)
	}
}
