package chamber

import (
	"context"
	"time"

	"github.com/cryochamber/cryochamber/validate"
)

// A slow alert must not eat the next wake (issue 23, item 9). The wake arms the next timer, then
// delivers what the session's end calls for (an alert, a notice), which may take up to
// deliverTimeout. A WAKE that falls inside that delivery fires the timer while the wake's own
// service is still active: systemd merges the start into the running service, the session does
// not run, and only the dead-man notices, as `missed`, a fallback_after later. So once the
// deliveries are done, a wake timer whose instant has passed (or is about to) while we ran is
// armed again, a moment ahead: its session runs once this process has exited.

// rearmIfPassed re-arms the wake (and its dead-man) when its timer fired, or would fire, while
// this process still runs.
func (r *runner) rearmIfPassed(ctx context.Context) {
	if r.st.Phase != PhaseArmed || r.st.Timers.Wake == nil || r.cancelRequested() {
		return
	}
	now := r.now()
	if r.st.Timers.Wake.After(now.Add(armLead)) {
		return
	}
	t := ceilSecond(now.Add(armLead)).UTC()
	rep := validate.New(nil)
	if err := r.arm(ctx, rep, t); err != nil {
		r.warnf("the wake timer (due %s) fired while the alert was delivered, and could not be armed again (%v): the dead-man timer will re-arm it", r.st.Timers.Wake.Format(time.RFC3339), err)
		return
	}
	r.printf("the wake timer fell due while the alert was delivered: armed again for %s", t.Format(time.RFC3339))
}
