package chamber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/cryochamber/cryochamber/internal/heartbeat"
	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/validate"
)

// The wiring of [heartbeat] (internal/heartbeat holds the client). A session pings `/start`
// before its agent runs and `URL` or `/fail` once it is judged; every hibernation then sets
// the check's timeout to the seconds until the next wake, so a monitor off the machine expects
// the next ping at the next wake plus grace and reports the plan when the machine is gone.
// Completion and cancel pause the check. Nothing here can hold up a session: the start ping has
// startPingDeadline over all its attempts, the others endPingDeadline, and a failure is
// recorded (heartbeat.json, shown by status) and never an error of the wake.

const (
	startPingDeadline = 3 * time.Second
	endPingDeadline   = 10 * time.Second
	heartbeatName     = "heartbeat.json"
)

// HeartbeatRecord is heartbeat.json in the private state directory: what the monitor last
// answered, and what it was last told to expect. `status --json` shows it as `heartbeat`.
type HeartbeatRecord struct {
	Last     string     `json:"last"` // start, success, fail, timeout, pause, get
	At       time.Time  `json:"at"`
	OK       bool       `json:"ok"`
	Error    string     `json:"error,omitempty"`
	FailedAt *time.Time `json:"failed_at,omitempty"` // the latest request that failed
	Failure  string     `json:"failure,omitempty"`
	Timeout  int        `json:"timeout,omitempty"` // the timeout last set (seconds)
	Grace    int        `json:"grace,omitempty"`
	Expect   *time.Time `json:"expect,omitempty"`    // the next ping the monitor expects
	LastPing *time.Time `json:"last_ping,omitempty"` // the last success or fail ping the monitor took (it counts the timeout from it)
	Paused   bool       `json:"paused,omitempty"`
}

func (r *runner) heartbeatClient(d time.Duration) *heartbeat.Client {
	return &heartbeat.Client{Deadline: d}
}

// heartbeatAPI is the check in the management API, with its key from the captured secrets.
func (r *runner) heartbeatAPI() (heartbeat.API, bool, error) {
	h := r.cfg.Heartbeat
	if h == nil || h.APIURL == "" {
		return heartbeat.API{}, false, nil
	}
	key, ok := lookupEnv(r.alertEnv(), h.APIKeyEnv)
	if !ok || key == "" {
		return heartbeat.API{}, true, fmt.Errorf("heartbeat.api_key_env names %s, which was not set when the chamber started", h.APIKeyEnv)
	}
	return heartbeat.API{URL: h.APIURL, Key: key, Check: h.Check}, true, nil
}

func (r *runner) loadHeartbeat() HeartbeatRecord {
	var rec HeartbeatRecord
	if r.store == "" {
		return rec
	}
	if data, err := r.store.read(heartbeatName, 1<<16); err == nil {
		_ = json.Unmarshal(data, &rec)
	}
	return rec
}

// noteHeartbeat records the answer to one request. The record is a report for status, never
// read to decide anything.
func (r *runner) noteHeartbeat(what string, err error, change func(*HeartbeatRecord)) {
	if r.unlocked || r.store == "" {
		return
	}
	rec := r.loadHeartbeat()
	rec.Last, rec.At, rec.OK, rec.Error = what, r.now().UTC(), err == nil, ""
	if err != nil {
		t := rec.At
		rec.Error = termtext.OneLine(err.Error(), 300)
		rec.FailedAt, rec.Failure = &t, what+": "+rec.Error
		r.warnf("heartbeat: %s: %v", what, rec.Error)
	}
	if change != nil {
		change(&rec)
	}
	data, _ := json.MarshalIndent(rec, "", "  ")
	if werr := r.store.write(heartbeatName, append(data, '\n'), nil); werr != nil {
		r.warnf("heartbeat: cannot record the monitor's answer: %v", werr)
	}
}

// heartbeatStart pings URL/start as session n begins (within startPingDeadline).
func (r *runner) heartbeatStart(ctx context.Context, n int) {
	h := r.cfg.Heartbeat
	if h == nil || h.URL == "" {
		return
	}
	err := r.heartbeatClient(startPingDeadline).Ping(ctx, h.URL, heartbeat.Start, fmt.Sprintf("session %d started", n))
	r.noteHeartbeat("start", err, nil)
}

// heartbeatEnd reports how session n ended: URL when it ended well, URL/fail with reason (one
// line: what cryochamber concluded, and at most the agent's own summary) when it failed. Then,
// when a next wake is armed, the check's timeout is set to it; when the plan has ended (pause),
// the check is paused. A refused session (nothing armed, not paused) leaves the check down.
func (r *runner) heartbeatEnd(ctx context.Context, n int, good bool, reason string, next *time.Time, pause bool) {
	h := r.cfg.Heartbeat
	if h == nil {
		return
	}
	pinged := r.now()
	if h.URL != "" {
		kind := heartbeat.Success
		if !good {
			kind = heartbeat.Fail
		}
		err := r.heartbeatClient(endPingDeadline).Ping(ctx, h.URL, kind, fmt.Sprintf("session %d: %s", n, reason))
		if err == nil {
			pinged = r.now()
		}
		r.noteHeartbeat(string(kind), err, func(rec *HeartbeatRecord) {
			if err == nil {
				t := pinged.UTC()
				rec.LastPing = &t
			}
		})
	}
	switch {
	case next != nil:
		r.heartbeatExpect(ctx, *next, pinged)
	case pause:
		r.heartbeatPause(ctx)
	}
}

// heartbeatExpect sets the check's timeout so that the monitor expects the next ping at next:
// the monitor counts the timeout from the last ping it received, at from.
func (r *runner) heartbeatExpect(ctx context.Context, next, from time.Time) {
	api, ok, err := r.heartbeatAPI()
	if !ok {
		return
	}
	if err != nil {
		r.noteHeartbeat("timeout", err, nil)
		return
	}
	timeout := int(math.Ceil(next.Sub(from).Seconds()))
	grace := int(math.Ceil(r.cfg.Heartbeat.Grace.D.Seconds()))
	ch, err := r.heartbeatClient(endPingDeadline).SetTimeout(ctx, api, timeout, grace)
	if err == nil && ch.Timeout != heartbeat.Clamp(timeout) {
		err = fmt.Errorf("the monitor holds a timeout of %ds, not the %ds sent", ch.Timeout, heartbeat.Clamp(timeout))
	}
	r.noteHeartbeat("timeout", err, func(rec *HeartbeatRecord) {
		if err == nil {
			t := from.UTC().Add(time.Duration(ch.Timeout) * time.Second).Truncate(time.Second)
			rec.Timeout, rec.Grace, rec.Expect, rec.Paused = ch.Timeout, ch.Grace, &t, false
		}
	})
}

// heartbeatRearm sets the check's timeout again after the operator moved the next wake
// (`wake --at`): counted, as the monitor counts it, from the last ping it took.
func (r *runner) heartbeatRearm(ctx context.Context) {
	if r.cfg.Heartbeat == nil || r.st.Phase != PhaseArmed || r.st.Wake == nil {
		return
	}
	from := r.now()
	if rec := r.loadHeartbeat(); rec.LastPing != nil {
		from = *rec.LastPing
	}
	r.heartbeatExpect(ctx, *r.st.Wake, from)
}

// heartbeatPause pauses the check: the plan is complete or cancelled, no ping is expected.
func (r *runner) heartbeatPause(ctx context.Context) {
	api, ok, err := r.heartbeatAPI()
	if !ok {
		return
	}
	if err == nil {
		_, err = r.heartbeatClient(endPingDeadline).Pause(ctx, api)
	}
	r.noteHeartbeat("pause", err, func(rec *HeartbeatRecord) {
		if err == nil {
			rec.Paused, rec.Expect = true, nil
		}
	})
}

// heartbeatStatus is the record for status, and a warning when the latest request failed.
func (r *runner) heartbeatStatus() (*HeartbeatRecord, []string) {
	if r.cfg.Heartbeat == nil {
		return nil, nil
	}
	rec := r.loadHeartbeat()
	if rec.At.IsZero() {
		if _, err := os.Stat(r.store.path(heartbeatName)); errors.Is(err, os.ErrNotExist) {
			return &rec, nil
		}
	}
	if !rec.OK && rec.Error != "" {
		return &rec, []string{fmt.Sprintf("heartbeat: the monitor did not take the %s request at %s: %s", rec.Last, rec.At.Format(time.RFC3339), rec.Error)}
	}
	return &rec, nil
}

// checkHeartbeatMonitor is validate's step 9: the check as the monitor holds it (read back
// with GET), against the next wake. A monitor that cannot be reached is a warning: it is off
// the machine, and never a reason to refuse a hibernation.
func (r *runner) checkHeartbeatMonitor(ctx context.Context, rep *validate.Report) {
	h := r.cfg.Heartbeat
	if h == nil {
		return
	}
	api, ok, err := r.heartbeatAPI()
	if !ok {
		rep.Add(validate.StepHeartbeat, validate.Skip, "pings only (no api_url): the monitor's timeout is not set by cryochamber")
		return
	}
	if err != nil {
		rep.Add(validate.StepHeartbeat, validate.Warn, "%v", err)
		return
	}
	ch, err := r.heartbeatClient(endPingDeadline).Get(ctx, api)
	if err != nil {
		rep.Add(validate.StepHeartbeat, validate.Warn, "cannot read the check back: %v", err)
		return
	}
	rec := r.loadHeartbeat()
	detail := fmt.Sprintf("the monitor holds timeout %ds, grace %ds, status %s", ch.Timeout, ch.Grace, termtext.OneLine(ch.Status, 20))
	if ch.NextPing != "" {
		detail += ", next ping expected " + termtext.OneLine(ch.NextPing, 40)
	}
	switch {
	case r.st.Phase == PhaseArmed && rec.Timeout != 0 && ch.Timeout != rec.Timeout:
		rep.Add(validate.StepHeartbeat, validate.Warn, "%s; cryochamber set %ds", detail, rec.Timeout)
	case r.st.Phase == PhaseArmed && r.st.Wake != nil && rec.Expect != nil && !rec.Expect.Equal(r.st.Wake.UTC()) && absDur(rec.Expect.Sub(*r.st.Wake)) > 2*time.Second:
		rep.Add(validate.StepHeartbeat, validate.Warn, "%s; it expects the next ping at %s, the next wake is %s", detail, rec.Expect.Format(time.RFC3339), r.st.Wake.UTC().Format(time.RFC3339))
	default:
		rep.Add(validate.StepHeartbeat, validate.Pass, "%s", detail)
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// heartbeatLine is status's line about the monitor.
func heartbeatLine(hb *HeartbeatRecord, loc *time.Location, now time.Time) string {
	if hb.At.IsZero() {
		return "nothing sent yet"
	}
	line := fmt.Sprintf("last %s %s: ", hb.Last, When(hb.At, loc, now))
	if hb.OK {
		line += "ok"
	} else {
		line += "FAILED: " + hb.Error
	}
	switch {
	case hb.Paused:
		line += "; the check is paused"
	case hb.Expect != nil:
		line += fmt.Sprintf("; the monitor expects the next ping %s (timeout %ds, grace %ds)", When(*hb.Expect, loc, now), hb.Timeout, hb.Grace)
	}
	return line
}
