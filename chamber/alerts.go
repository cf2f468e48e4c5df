package chamber

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
)

// Alert is one alert to deliver: why, and to whom.
type Alert struct {
	Chamber string
	Session int
	Reason  string // failure, refused, timeout, crashed, no-exit, missed, overdue...
	Text    string
	Time    time.Time
	Targets []FallbackEntry
}

// SecretsFile (in the chamber's state directory, mode 0600) holds the variables alert delivery needs
// (email.password_env, webhook.secret_env), captured at start. Unlike the environment file it
// is never given to the agent: an agent that reads untrusted text must not see them.
const SecretsFile = "secrets"

// deliver sends one alert to one target with the fallback package.
func deliver(ctx context.Context, cfg *Config, env []string, a Alert, t FallbackEntry) error {
	fa := fallback.Alert{Chamber: a.Chamber, Session: a.Session, Reason: a.Reason, Message: a.Text, Time: a.Time}
	if t.Message != "" {
		fa.Message += "\n\nThe agent's fallback message: " + t.Message
	}
	switch t.Action {
	case "email":
		e := cfg.Email
		if e == nil {
			return errors.New("no [email] table in cryo.toml")
		}
		pw, err := fallback.PasswordFrom(ctx, env, e.PasswordEnv, e.PasswordCommand)
		if err != nil {
			return err
		}
		return fallback.SendEmail(ctx, fallback.EmailConfig{
			Host: e.Host, Port: e.Port, TLS: e.TLS, Username: e.Username, Password: pw, From: e.From, Timeout: e.Timeout.D,
		}, t.Target, fa)
	case "webhook":
		wc := fallback.WebhookConfig{Timeout: 10 * time.Second, Retries: 3}
		if w := cfg.Webhook; w != nil {
			wc.Timeout, wc.Retries = w.Timeout.D, *w.Retries
			if w.SecretEnv != "" {
				secret, ok := lookupEnv(env, w.SecretEnv)
				if !ok || secret == "" {
					return fmt.Errorf("webhook.secret_env names %s, which was not set when the chamber started", w.SecretEnv)
				}
				wc.Secret = []byte(secret)
			}
		}
		return fallback.PostWebhook(ctx, wc, t.Target, fa)
	}
	return fmt.Errorf("unknown action %q", t.Action)
}

// secretNames are the variables only cryochamber may see.
func (c *Config) secretNames() []string {
	var names []string
	if c.Email != nil && c.Email.PasswordEnv != "" {
		names = append(names, c.Email.PasswordEnv)
	}
	if c.Webhook != nil && c.Webhook.SecretEnv != "" {
		names = append(names, c.Webhook.SecretEnv)
	}
	return names
}

// alertEnv is the environment alert delivery runs with: this process's, the captured one, and
// the captured secrets.
func (r *runner) alertEnv() []string {
	env := mergeEnv(r.env.Environ, r.capturedEnv())
	if data, err := os.ReadFile(r.stateFile(SecretsFile)); err == nil {
		if vars, err := timer.ParseEnvFile(data); err == nil {
			env = mergeEnv(env, vars)
		}
	}
	return env
}

// alertTargets are the operator's [[fallback]] entries plus the FALLBACK markers of the latest
// session that the policy allows, each target once.
func (r *runner) alertTargets(m *marker.Result) []FallbackEntry {
	var out []FallbackEntry
	seen := map[string]bool{}
	add := func(f FallbackEntry) {
		k := f.Action + " " + f.Target
		if seen[k] {
			return
		}
		seen[k] = true
		out = append(out, f)
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

// alert records an alert in the outbox and delivers it to every target. A delivery failure is
// logged and kept in the outbox; it never stops anything else.
func (r *runner) alert(ctx context.Context, n int, reason, text string, m *marker.Result) {
	now := r.now().UTC()
	a := Alert{Chamber: r.dir, Session: n, Reason: reason, Text: text, Time: now, Targets: r.alertTargets(m)}
	rec, err := sendAlert(ctx, r.cfg, r.dir, r.alertEnv(), a)
	if err != nil {
		r.printf("warning: %v", err)
	}
	r.st.LastAlert = rec
	_ = r.save()
	note := fmt.Sprintf("alert (%s): %s", reason, rec.summary())
	_ = sessionlog.AppendNote(r.logPath(), r.now(), note)
	r.printf("%s", note)
}

// notice writes a message to the outbox that is not delivered anywhere: a failure that will be
// retried is visible (`receive`, sync tools) without paging anyone. Its name derives from the
// session, so a recovery that repeats the step writes it once.
func (r *runner) notice(n int, at time.Time, reason, text string) {
	t := at.UTC()
	msg := &message.Message{
		ID:      fmt.Sprintf("%s-session%d-notice", t.Format("20060102T150405.000000000Z"), n),
		From:    "cryochamber",
		Subject: fmt.Sprintf("%s: session %d %s", filepath.Base(r.dir), n, reason),
		Time:    t,
		Kind:    message.KindNotice,
		Session: n,
		Body:    text,
	}
	if _, err := message.Write(filepath.Join(r.dir, outboxDir), msg); err != nil && !errors.Is(err, os.ErrExist) {
		r.printf("warning: cannot write a notice to the outbox: %v", err)
	}
}

// sendAlert writes the alert to the outbox, delivers it, and records the results in the outbox
// file. It does not touch timer.json or the log, so `fallback` can use it while a session holds
// the lock.
func sendAlert(ctx context.Context, cfg *Config, dir string, env []string, a Alert) (*AlertRecord, error) {
	body := a.Text + "\n"
	for _, t := range a.Targets {
		if t.Message != "" {
			body += fmt.Sprintf("\n%s %s: %s", t.Action, t.Target, t.Message)
		}
	}
	fa := fallback.Alert{Chamber: a.Chamber, Session: a.Session, Reason: a.Reason, Message: a.Text, Time: a.Time}
	msg := &message.Message{
		From:    "cryochamber",
		Subject: fallback.Subject(fa),
		Time:    a.Time,
		Kind:    message.KindAlert,
		Session: a.Session,
		Body:    strings.TrimRight(body, "\n") + "\n",
	}
	rec := &AlertRecord{At: a.Time, Session: a.Session, Reason: a.Reason, OK: true}
	out := filepath.Join(dir, outboxDir)
	// Written first, marked pending: a process killed while delivering leaves it for the next
	// lock holder to deliver (redeliverPending).
	msg.Delivery = deliveryPending + " " + encodeTargets(a.Targets)
	if _, err := message.Write(out, msg); err != nil {
		rec.OK = false
		rec.Results = append(rec.Results, "outbox: "+err.Error())
		return rec, fmt.Errorf("cannot write the alert to the outbox: %w", err)
	}
	if len(a.Targets) == 0 {
		rec.Results = append(rec.Results, "no targets configured: written to messages/outbox only")
	}
	for _, t := range a.Targets {
		if err := deliver(ctx, cfg, env, a, t); err != nil {
			rec.OK = false
			rec.Results = append(rec.Results, fmt.Sprintf("%s %s: FAILED: %v", t.Action, t.Target, err))
		} else {
			rec.Results = append(rec.Results, fmt.Sprintf("%s %s: delivered", t.Action, t.Target))
		}
	}
	msg.Delivery = strings.Join(rec.Results, "; ")
	if err := message.Rewrite(out, msg); err != nil {
		return rec, fmt.Errorf("cannot record the delivery result in the outbox: %w", err)
	}
	return rec, nil
}

func (a *AlertRecord) summary() string {
	if a == nil {
		return ""
	}
	return strings.Join(a.Results, "; ")
}

// deliveryPending marks an alert written to the outbox whose delivery has not finished.
const deliveryPending = "pending:"

func encodeTargets(ts []FallbackEntry) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, t.Action+"="+t.Target)
	}
	return strings.Join(parts, " ")
}

func decodeTargets(s string) []FallbackEntry {
	var out []FallbackEntry
	for _, f := range strings.Fields(s) {
		if a, t, ok := strings.Cut(f, "="); ok && (a == "email" || a == "webhook") {
			out = append(out, FallbackEntry{Action: a, Target: t})
		}
	}
	return out
}

// redeliverPending delivers the alerts of the last week whose delivery was cut short (the
// process was killed while sending). Only the lock holder calls it; an alert is pending for
// two minutes before it counts as cut short, longer than a delivery takes.
func (r *runner) redeliverPending(ctx context.Context) {
	out := r.path(outboxDir)
	names, err := message.Names(out)
	if err != nil {
		return
	}
	now := r.now().UTC()
	since := now.Add(-7 * 24 * time.Hour).Format("20060102T150405")
	for _, name := range names {
		if name < since {
			continue // names start with their UTC time: older than a week
		}
		m, err := message.Read(out, name)
		if err != nil || m.Kind != message.KindAlert || !strings.HasPrefix(m.Delivery, deliveryPending) || now.Sub(m.Time) < 2*time.Minute {
			continue
		}
		a := Alert{Chamber: r.dir, Session: m.Session, Text: m.Body, Time: m.Time, Targets: decodeTargets(strings.TrimPrefix(m.Delivery, deliveryPending))}
		if i := strings.LastIndex(m.Subject, ": "); i >= 0 {
			a.Reason = strings.Fields(m.Subject[i+2:] + " x")[0]
		}
		var results []string
		for _, t := range a.Targets {
			if err := deliver(ctx, r.cfg, r.alertEnv(), a, t); err != nil {
				results = append(results, fmt.Sprintf("%s %s: FAILED: %v", t.Action, t.Target, err))
			} else {
				results = append(results, fmt.Sprintf("%s %s: delivered", t.Action, t.Target))
			}
		}
		if len(results) == 0 {
			results = append(results, "no targets configured: written to messages/outbox only")
		}
		m.Delivery = "redelivered after an interruption: " + strings.Join(results, "; ")
		if err := message.Rewrite(out, m); err == nil {
			_ = sessionlog.AppendNote(r.logPath(), r.now(), "alert "+m.ID+": "+m.Delivery)
			r.printf("alert %s %s", m.ID, m.Delivery)
		}
	}
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

// globMatch matches s against a pattern where * is any run of characters (including none, and
// including '/' and '@') and ? is one character.
func globMatch(p, s string) bool {
	// Iterative matcher with backtracking to the last star: linear in practice, no recursion.
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
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
