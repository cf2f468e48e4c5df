package chamber

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/sessionlog"
)

// An alert is delivered when a person is needed: the plan stopped, the retries were used up, a
// session hangs, a wake never ran, the chamber is gone. A notice is news the operator should see
// without being paged for it (the plan completed, a chamber recovered, an edit of cryo.toml that
// is not in force): it goes to the operator's own [[fallback]] targets only, never to a target a
// marker named. Both are written to messages/outbox/ after delivery (deliver.go).

// alert delivers an alert for session n to the operator's targets and the allowed FALLBACK
// targets (of m, else of the latest session that answered). text says what happened; the alert
// adds where and what to do.
func (r *runner) alert(ctx context.Context, n int, reason, text, resume string, m *marker.Result) {
	a := r.newAlert(n, reason, text, resume, kindAlert)
	a.Targets = r.alertTargets(m)
	r.send(ctx, a)
}

// notify delivers a notice for session n to the operator's own targets.
func (r *runner) notify(ctx context.Context, n int, reason, text string) {
	a := r.newAlert(n, reason, text, "", kindNotice)
	for _, f := range r.cfg.Fallback {
		a.Targets = append(a.Targets, pendingTarget{Action: f.Action, Target: f.Target})
	}
	r.send(ctx, a)
}

// resumeHint is the command that starts a stopped chamber again.
func (r *runner) resumeHint() string {
	return fmt.Sprintf("fix the cause, then run: cryochamber start %s", filepath.Join(r.dir, r.planName()))
}

// alertTargets are the operator's [[fallback]] entries plus the FALLBACK markers the policy
// allows (of m when given, and of the latest session that answered), each target once. A
// marker that names an operator's target adds its message to it: the prompt tells the agent
// that target is the one it may use.
func (r *runner) alertTargets(m *marker.Result) []pendingTarget {
	var out []pendingTarget
	index := map[string]int{}
	add := func(f FallbackEntry) {
		k := f.Action + " " + strings.ToLower(f.Target)
		if i, ok := index[k]; ok {
			if f.Message != "" && !strings.Contains(out[i].Message, f.Message) {
				if out[i].Message != "" {
					out[i].Message += "\n"
				}
				out[i].Message += f.Message
			}
			return
		}
		index[k] = len(out)
		out = append(out, pendingTarget{Action: f.Action, Target: f.Target, Message: f.Message})
	}
	for _, f := range r.cfg.Fallback {
		add(f)
	}
	if m != nil {
		for _, f := range m.Fallbacks {
			if r.targetAllowed(f.Action, f.Target) {
				add(FallbackEntry{Action: f.Action, Target: f.Target, Message: f.Message})
			}
		}
	}
	for _, f := range r.st.Fallbacks {
		if r.targetAllowed(f.Action, f.Target) {
			add(f)
		}
	}
	return out
}

// fallbackPolicy lists the FALLBACK markers whose target the operator does not allow.
func (r *runner) fallbackPolicy(m *marker.Result) []string {
	var msgs []string
	for _, f := range m.Fallbacks {
		if !r.targetAllowed(f.Action, f.Target) {
			msgs = append(msgs, fmt.Sprintf("line %d: FALLBACK %s to %q is not allowed (fallback_allow in cryo.toml) and was ignored", f.Line, f.Action, f.Target))
		}
	}
	return msgs
}

// fallbackTargets is what the prompt tells the agent it may name in a FALLBACK.
func (c *Config) fallbackTargets() []string {
	var out []string
	for _, f := range c.Fallback {
		out = append(out, f.Target)
	}
	return append(out, c.FallbackAllow...)
}

// targetAllowed applies fallback_allow. By default a marker may only name a target the operator
// already configured in [[fallback]]: the agent reads untrusted text, and a prompt injection must
// not be able to mail or POST the chamber's details anywhere.
func (r *runner) targetAllowed(action, target string) bool {
	for _, f := range r.cfg.Fallback {
		if f.Action == action && strings.EqualFold(f.Target, target) {
			return true
		}
	}
	for _, p := range r.cfg.FallbackAllow {
		if globMatch(strings.ToLower(p), strings.ToLower(target)) {
			return true
		}
	}
	return false
}

// globMatch matches s against a fallback_allow pattern: `*` is any run of characters other
// than '/' and '@' (so "https://*.example.com/*" never matches
// "https://evil.test/x.example.com/y", and "*@example.com" never matches "a@evil.test@example.com"
// unless the part before is one address), `?` is one character other than those, and every
// other character is itself.
func globMatch(p, s string) bool {
	// Iterative matcher with backtracking to the last star; a star never spans a separator,
	// so backtracking stops at one.
	pi, si, star, mark := 0, 0, -1, 0
	sep := func(c byte) bool { return c == '/' || c == '@' }
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '?' && !sep(s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] != '*' && p[pi] != '?' && p[pi] == s[si]:
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0 && !sep(s[mark]):
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// blockTail is the last lines the agent printed in session n (stdout and stderr, sanitized):
// what an alert quotes so that the reader sees the cause ("Invalid API key", "401") without
// opening the log.
func (r *runner) blockTail(n, lines int) string {
	if r.fs == nil {
		return ""
	}
	info, err := sessionlog.Find(r.logPath(), n)
	if err != nil {
		return ""
	}
	tail, err := sessionlog.Tail(r.logPath(), info, lines+2)
	if err != nil {
		return ""
	}
	var out []string
	for _, l := range tail {
		if l.Kind == sessionlog.Stdout || l.Kind == sessionlog.Stderr {
			out = append(out, "  "+l.Raw())
		}
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	return strings.Join(out, "\n")
}

func (r *runner) logPath() string { return filepath.Join(r.dir, LogFile) }
