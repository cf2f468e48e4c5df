package chamber

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer"
)

// Delivery of alerts and notices. The promise is that an alert arrives, whatever stopped the
// plan, so delivery needs nothing from the chamber and nothing from the agent:
//
//   - What is to be delivered, and where, is a file in the private state directory (alerts/),
//     written before the first attempt and removed when every target has it. The outbox copy in
//     the chamber is written after delivery, for the operator to read; it is never read back.
//     A full or missing chamber, or even a full state directory, never stops the attempt.
//   - Every target is tried at once, each with its own deadline, so a webhook that hangs does
//     not starve the email.
//   - What failed is tried again by the next command that holds the chamber's lock, and by the
//     chamber's own alert timer, with a growing delay, until it arrives (or, after a month, is
//     given up with a note in the log).

const (
	kindAlert  = message.KindAlert
	kindNotice = message.KindNotice
)

// pendingAlert is one alert or notice in the private state directory.
type pendingAlert struct {
	ID       string          `json:"id"`
	Kind     string          `json:"kind"` // alert or notice
	Chamber  string          `json:"chamber"`
	Session  int             `json:"session"`
	Reason   string          `json:"reason"`
	Text     string          `json:"text"`
	Resume   string          `json:"resume,omitempty"` // what the operator should do
	Time     time.Time       `json:"time"`
	Host     string          `json:"host,omitempty"`
	Targets  []pendingTarget `json:"targets"`
	Outbox   bool            `json:"outbox"` // the outbox copy is written
	Attempts int             `json:"attempts"`
	NextTry  time.Time       `json:"next_try"`
}

// pendingTarget is one target of an alert and how its delivery went.
type pendingTarget struct {
	Action    string     `json:"action"`
	Target    string     `json:"target"`
	Message   string     `json:"message,omitempty"` // the agent's FALLBACK message for this target
	Delivered *time.Time `json:"delivered,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Bounds of redelivery.
const (
	deliverTimeout = 90 * time.Second    // all targets of one attempt, in parallel
	giveUpAfter    = 30 * 24 * time.Hour // an alert still undelivered after this is given up
	maxPending     = 256                 // alerts kept for redelivery; the oldest go first
	maxAlertText   = 64 << 10
)

// retryBackoff is the wait before the attempt after the k-th (1-based) failed one.
func retryBackoff(k int) time.Duration {
	steps := []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour}
	if k-1 < len(steps) {
		return steps[max(k-1, 0)]
	}
	return 6 * time.Hour
}

// newAlert starts an alert or notice for session n.
func (r *runner) newAlert(n int, reason, text, resume, kind string) *pendingAlert {
	now := r.now().UTC()
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	return &pendingAlert{
		ID:      fmt.Sprintf("%s-session%d-%s-%s", now.Format("20060102T150405.000000000Z"), n, slugWord(reason), hex.EncodeToString(rnd[:])),
		Kind:    kind,
		Chamber: r.dir,
		Session: n,
		Reason:  reason,
		Text:    clipBytes(text, maxAlertText),
		Resume:  resume,
		Time:    now,
		Host:    r.env.Host,
	}
}

// slugWord keeps the letters, digits and dashes of s (a reason) for a file name.
func slugWord(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "alert"
	}
	return b.String()
}

// send delivers a new alert or notice: recorded in the private state directory, delivered to
// every target in parallel, copied to the outbox, and kept for redelivery if a target failed.
func (r *runner) send(ctx context.Context, a *pendingAlert) {
	if err := r.store.ensure(); err == nil {
		if err := r.saveAlert(a); err != nil {
			r.warnf("cannot record the %s before delivering it (delivering anyway): %v", a.Kind, err)
		}
	}
	r.env.checkpoint("alert-recorded")
	r.attempt(ctx, a)
	if a.Kind == kindAlert {
		r.st.LastAlert = a.record()
	}
	note := fmt.Sprintf("%s (%s): %s", a.Kind, a.Reason, a.summary())
	r.logNote(note)
	r.printf("%s", note)
	r.armAlertTimer(ctx)
}

// attempt tries every target that does not have the alert yet, at once, each within its own
// deadline; then writes the outbox copy if it is not there yet; then records the result (or
// removes the record when nothing is left to do).
func (r *runner) attempt(ctx context.Context, a *pendingAlert) {
	if ctx == nil || ctx.Err() != nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliverTimeout)
	defer cancel()
	env := r.alertEnv()
	var wg sync.WaitGroup
	for i := range a.Targets {
		t := &a.Targets[i]
		if t.Delivered != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.deliverOne(ctx, env, a, *t); err != nil {
				t.Error = err.Error()
				return
			}
			now := r.now().UTC()
			t.Delivered, t.Error = &now, ""
		}()
	}
	wg.Wait()
	a.Attempts++
	a.NextTry = r.now().UTC().Add(retryBackoff(a.Attempts))
	if !a.Outbox && r.fs != nil {
		if err := r.writeOutboxCopy(a); err != nil && !errors.Is(err, os.ErrExist) {
			r.warnf("cannot copy the %s to messages/outbox: %v", a.Kind, err)
		} else {
			a.Outbox = true
		}
	}
	switch {
	case a.done() && (a.Outbox || r.fs == nil && a.Attempts > 1):
		_ = os.Remove(r.store.path(filepath.Join(alertsDir, a.ID+".json")))
	case r.now().Sub(a.Time) > giveUpAfter:
		_ = os.Remove(r.store.path(filepath.Join(alertsDir, a.ID+".json")))
		r.logNote(fmt.Sprintf("%s %s given up after %s: %s", a.Kind, a.ID, giveUpAfter, a.summary()))
	default:
		if err := r.saveAlert(a); err != nil {
			r.warnf("cannot record the %s for redelivery: %v", a.Kind, err)
		}
	}
}

// done reports whether every target has the alert.
func (a *pendingAlert) done() bool {
	for _, t := range a.Targets {
		if t.Delivered == nil {
			return false
		}
	}
	return true
}

// summary says how delivery went, target by target.
func (a *pendingAlert) summary() string {
	if len(a.Targets) == 0 {
		return "no targets configured: written to messages/outbox only"
	}
	var parts []string
	for _, t := range a.Targets {
		if t.Delivered != nil {
			parts = append(parts, fmt.Sprintf("%s %s: delivered", t.Action, t.Target))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s: FAILED: %s (will retry)", t.Action, t.Target, t.Error))
		}
	}
	return strings.Join(parts, "; ")
}

// record is the AlertRecord the state keeps of the last alert.
func (a *pendingAlert) record() *AlertRecord {
	return &AlertRecord{At: a.Time, Session: a.Session, Reason: a.Reason, OK: a.done(), Results: strings.Split(a.summary(), "; ")}
}

// fullText is what every target receives: what happened, what to do, where.
func (a *pendingAlert) fullText() string {
	text := strings.TrimRight(a.Text, "\n")
	if a.Resume != "" {
		text += "\n\nWhat to do: " + a.Resume
	}
	return text
}

// deliverOne sends the alert to one target with the fallback package.
func (r *runner) deliverOne(ctx context.Context, env []string, a *pendingAlert, t pendingTarget) error {
	fa := fallback.Alert{Chamber: a.Chamber, Session: a.Session, Reason: a.Reason, Message: a.fullText(), Time: a.Time, Host: a.Host}
	if t.Message != "" {
		fa.Message += "\n\nThe agent's fallback message: " + t.Message
	}
	switch t.Action {
	case "email":
		e := r.cfg.Email
		if e == nil {
			return errors.New("no [email] table in the accepted cryo.toml")
		}
		pw, err := fallback.PasswordFrom(ctx, env, e.PasswordEnv, e.PasswordCommand)
		if err != nil {
			return err
		}
		ectx, cancel := context.WithTimeout(ctx, e.Timeout.D+5*time.Second)
		defer cancel()
		return fallback.SendEmail(ectx, fallback.EmailConfig{
			Host: e.Host, Port: e.Port, TLS: e.TLS, Username: e.Username, Password: pw, From: e.From, Timeout: e.Timeout.D,
		}, t.Target, fa)
	case "webhook":
		wc := fallback.WebhookConfig{Timeout: 10 * time.Second, Retries: 3}
		if w := r.cfg.Webhook; w != nil {
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

// alertEnv is the environment delivery runs with: this process's, the captured one, and the
// captured secrets (from the private state directory, never from the chamber).
func (r *runner) alertEnv() []string {
	env := mergeEnv(r.env.Environ, r.capturedEnv())
	if data, err := r.store.read(SecretsFile, 1<<20); err == nil {
		if vars, err := timer.ParseEnvFile(data); err == nil {
			env = mergeEnv(env, vars)
		}
	}
	return env
}

// writeOutboxCopy writes the alert to messages/outbox/ under a name derived from its ID, so a
// second attempt finds it there (os.ErrExist).
func (r *runner) writeOutboxCopy(a *pendingAlert) error {
	body := a.fullText() + "\n"
	for _, t := range a.Targets {
		if t.Message != "" {
			body += fmt.Sprintf("\n%s %s: %s", t.Action, t.Target, t.Message)
		}
	}
	body += fmt.Sprintf("\nHost: %s\n", a.Host)
	fa := fallback.Alert{Chamber: a.Chamber, Session: a.Session, Reason: a.Reason, Time: a.Time}
	msg := &message.Message{
		ID:       a.ID,
		From:     "cryochamber",
		Subject:  fallback.Subject(fa),
		Time:     a.Time,
		Kind:     a.Kind,
		Session:  a.Session,
		Delivery: clipBytes(a.summary(), 1000),
		Body:     strings.TrimRight(body, "\n") + "\n",
	}
	_, err := r.writeOutbox(msg)
	return err
}

// saveAlert records a in the private state directory.
func (r *runner) saveAlert(a *pendingAlert) error {
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.store.path(alertsDir), 0o700); err != nil {
		return err
	}
	return r.store.write(filepath.Join(alertsDir, a.ID+".json"), append(data, '\n'), nil)
}

// pendingAlerts lists the alerts still to deliver, oldest first. Beyond maxPending the oldest
// are given up, so the directory stays small whatever happens.
func (r *runner) pendingAlerts() []*pendingAlert {
	ents, err := os.ReadDir(r.store.path(alertsDir))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) > maxPending && !r.unlocked {
		for _, n := range names[:len(names)-maxPending] {
			_ = os.Remove(r.store.path(filepath.Join(alertsDir, n)))
			r.logNote("alert " + strings.TrimSuffix(n, ".json") + " given up: too many undelivered alerts")
		}
		names = names[len(names)-maxPending:]
	}
	var out []*pendingAlert
	for _, n := range names {
		data, err := r.store.read(filepath.Join(alertsDir, n), 1<<20)
		if err != nil {
			continue
		}
		var a pendingAlert
		if json.Unmarshal(data, &a) == nil && a.ID+".json" == n {
			out = append(out, &a)
		}
	}
	return out
}

// undelivered counts the alerts (not notices) that some target does not have yet.
func (r *runner) undelivered() int {
	n := 0
	for _, a := range r.pendingAlerts() {
		if a.Kind == kindAlert && !a.done() {
			n++
		}
	}
	return n
}

// redeliver tries again the alerts whose next attempt is due. Only the lock holder calls it.
func (r *runner) redeliver(ctx context.Context) {
	pending := r.pendingAlerts()
	if len(pending) == 0 {
		return
	}
	now := r.now()
	var wg sync.WaitGroup
	for _, a := range pending {
		if now.Before(a.NextTry) && (a.Outbox || r.fs == nil) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.attempt(ctx, a)
		}()
	}
	wg.Wait()
	for _, a := range pending {
		if a.done() {
			r.logNote(fmt.Sprintf("%s %s delivered on attempt %d: %s", a.Kind, a.ID, a.Attempts, a.summary()))
		}
	}
	r.armAlertTimer(ctx)
}

// armAlertTimer arms the chamber's alert timer at the earliest next attempt of a pending alert,
// or removes it when nothing is pending. The timer runs the pinned copy of the binary (like the
// dead-man), so that it still runs if the installed binary was removed.
func (r *runner) armAlertTimer(ctx context.Context) {
	if r.unlocked {
		return
	}
	var next *time.Time
	for _, a := range r.pendingAlerts() {
		if a.done() {
			continue
		}
		if t := a.NextTry; next == nil || t.Before(*next) {
			next = &t
		}
	}
	if next == nil {
		if r.st.Timers.Alert != nil {
			if err := r.withBackend(ctx, func(be timer.Backend) error { return be.Disarm(ctx, r.id, timer.Alert) }); err != nil {
				r.warnf("cannot remove the alert timer: %v", err)
			} else {
				r.st.Timers.Alert = nil
			}
		}
		return
	}
	at := *next
	if soon := r.now().Add(armLead); at.Before(soon) {
		at = soon
	}
	at = ceilSecond(at.UTC())
	if r.st.Timers.Alert != nil && r.st.Timers.Alert.Equal(at) {
		return
	}
	job := timer.Job{Kind: timer.Alert, At: at, Argv: r.fallbackArgv()}
	if err := r.withBackend(ctx, func(be timer.Backend) error { return be.Arm(ctx, r.timerChamber(), job) }); err != nil {
		r.warnf("cannot arm the alert timer (undelivered alerts wait for the next command): %v", err)
		return
	}
	r.st.Timers.Alert = &at
}

// logNote appends a "# " line to the log between blocks, when the chamber can be written.
func (r *runner) logNote(text string) {
	if r.fs == nil || r.unlocked {
		return
	}
	if err := sessionlog.AppendNote(r.logPath(), r.now(), text); err != nil {
		r.warnf("cannot write to %s: %v", LogFile, err)
	}
}
