package chamber

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// Alert targets that fail for good (issue 23, item 12): a mailbox closed (550), a chat hook
// revoked (500). Delivery keeps retrying each alert for a month, but a person must hear of it
// long before: status and ps say it (in red on a terminal), `status --json` carries it
// (alert_targets_failing, alerts_reach_nobody), and a target that still works is told, once per
// failing target, by a notice that goes to the working targets only.

// failingAfter is how many failed attempts make a target "failing": the first attempt and the
// chamber's alert timer's retry a minute later both refused.
const failingAfter = 2

// FailingTarget is an alert target whose deliveries keep failing.
type FailingTarget struct {
	Action   string    `json:"action"`
	Target   string    `json:"target"`
	Since    time.Time `json:"since"`    // the oldest alert it has not received
	Attempts int       `json:"attempts"` // failed attempts of that alert
	Error    string    `json:"error"`    // the latest
}

func (f FailingTarget) key() string { return f.Action + " " + strings.ToLower(f.Target) }

// failingTargets are the targets that failed failingAfter attempts of a pending alert or notice.
func (r *runner) failingTargets() []FailingTarget {
	by := map[string]*FailingTarget{}
	for _, a := range r.pendingAlerts() {
		if a.Attempts < failingAfter {
			continue
		}
		for _, t := range a.Targets {
			if t.Delivered != nil || t.Error == "" {
				continue
			}
			f := FailingTarget{Action: t.Action, Target: t.Target, Since: a.Time, Attempts: a.Attempts, Error: t.Error}
			if old, ok := by[f.key()]; ok {
				if old.Since.Before(f.Since) {
					f.Since, f.Attempts = old.Since, max(old.Attempts, f.Attempts)
				}
			}
			by[f.key()] = &f
		}
	}
	out := make([]FailingTarget, 0, len(by))
	for _, f := range by {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// workingTargets are the operator's targets that are not failing.
func (r *runner) workingTargets(failing []FailingTarget) []pendingTarget {
	bad := map[string]bool{}
	for _, f := range failing {
		bad[f.key()] = true
	}
	var out []pendingTarget
	for _, f := range r.cfg.Fallback {
		if !bad[FailingTarget{Action: f.Action, Target: f.Target}.key()] {
			out = append(out, pendingTarget{Action: f.Action, Target: f.Target})
		}
	}
	return out
}

// reachNobody reports whether every one of the operator's targets is failing.
func (r *runner) reachNobody(failing []FailingTarget) bool {
	return len(failing) > 0 && len(r.cfg.Fallback) > 0 && len(r.workingTargets(failing)) == 0
}

// failingText says it in one line.
func failingText(failing []FailingTarget, nobody bool) string {
	var parts []string
	for _, f := range failing {
		parts = append(parts, fmt.Sprintf("%s %s fails since %s (%d attempts: %s)", f.Action, f.Target, f.Since.UTC().Format(time.RFC3339), f.Attempts, f.Error))
	}
	head := "an alert target fails"
	if nobody {
		head = "NO ALERT REACHES ANYONE: every target fails"
	}
	return head + ": " + strings.Join(parts, "; ") + "; fix the target (or replace it in cryo.toml, then `cryochamber reload`)"
}

// tellFailingTargets tells the targets that still work, once per failing target, that another
// one fails. Only a lock holder calls it.
func (r *runner) tellFailingTargets(ctx context.Context) {
	failing := r.failingTargets()
	for k := range r.st.Told {
		// A target that works again is told of again if it fails again.
		if strings.HasPrefix(k, "target ") && !strings.Contains(failingKeys(failing), "\n"+strings.TrimPrefix(k, "target ")+"\n") {
			delete(r.st.Told, k)
		}
	}
	if len(failing) == 0 {
		return
	}
	working := r.workingTargets(failing)
	if len(working) == 0 {
		return
	}
	var fresh []FailingTarget
	for _, f := range failing {
		if r.st.Told["target "+f.key()].IsZero() {
			fresh = append(fresh, f)
		}
	}
	if len(fresh) == 0 {
		return
	}
	a := r.newAlert(r.st.Session, "target-failing", fmt.Sprintf("chamber %s: %s.\nThis notice goes to the targets that still work.", r.dir, failingText(fresh, false)), "", kindNotice)
	a.Targets = working
	r.send(ctx, a)
	if r.st.Told == nil {
		r.st.Told = map[string]time.Time{}
	}
	for _, f := range fresh {
		r.st.Told["target "+f.key()] = r.now().UTC()
	}
	if err := r.save(); err != nil {
		r.warnf("%v", err)
	}
}

// red wraps s in the terminal's red when w is a terminal.
func red(w io.Writer, s string) string {
	if f, ok := w.(*os.File); ok && isTerminal(f.Fd()) {
		return "\x1b[31m" + s + "\x1b[0m"
	}
	return s
}

func failingKeys(f []FailingTarget) string {
	var b strings.Builder
	b.WriteString("\n")
	for _, t := range f {
		b.WriteString(t.key() + "\n")
	}
	return b.String()
}

// checkTargets marks a ps row whose alerts reach nobody (its problem says so, unless it has a
// worse one already).
func (row *PsRow) checkTargets(env *Env) {
	s, err := storeFor(env, chamberID(row.Dir))
	if err != nil {
		return
	}
	r := &runner{env: env, dir: row.Dir, id: row.ID, store: s, unlocked: true}
	raw, err := s.read(acceptedConfig, maxConfigSize)
	if err != nil {
		return
	}
	if r.cfg, err = ParseConfig(ConfigFile, raw, env.Local); err != nil {
		return
	}
	failing := r.failingTargets()
	if row.ReachNobody = r.reachNobody(failing); row.ReachNobody && row.Problem == "" {
		row.Problem = termtext.Line(failingText(failing, true))
	}
}
