package chamber

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/timer"
)

// Digests (`digest = "daily 09:00"` or `"weekly mon 09:00"`, in the chamber's zone): once a
// period, one message that says what the chamber did since the last one (sessions run,
// failures, replies, alerts), what comes (the upcoming wakes) and whether it is paused or
// stopped, through the operator's alert targets and (a sealed notice in the outbox) the
// chamber's channels. One OS timer per user runs `cryochamber digest --all --due --send` at
// every chamber's digest time (timer/digest.go); `start` and `reload` take the schedule into
// force, `cancel` takes the chamber out.

const digestName = "digest.json" // in the private state directory: the last digest sent

// digestRecord is digest.json.
type digestRecord struct {
	Last     time.Time `json:"last"`     // the end of the period the last digest covered
	Schedule string    `json:"schedule"` // the schedule in force when it was recorded
}

// DigestOptions are the options of `cryochamber digest`.
type DigestOptions struct {
	Dir  string
	All  bool // every chamber this user started (the registry)
	Send bool // deliver it, instead of printing it only
	Due  bool // only chambers whose digest time has come since their last digest
}

// DigestCounts is what a digest counts over its period.
type DigestCounts struct {
	Sessions int `json:"sessions"`
	Failures int `json:"failures"`
	Replies  int `json:"replies"`
	Answered int `json:"answered"`
	Alerts   int `json:"alerts"`
}

// Digest prints (and with Send, sends) the digest of one chamber or of every chamber. With Due,
// only the chambers whose digest time has passed since the last one are taken: that is what
// the user's digest timer runs.
func Digest(ctx context.Context, env *Env, opts DigestOptions) error {
	dirs := []string{opts.Dir}
	if opts.All {
		dirs = readRegistry(env.Registry)
	}
	var errs []string
	for _, dir := range dirs {
		if err := digestOne(ctx, env, dir, opts); err != nil {
			if !opts.All {
				return err
			}
			errs = append(errs, fmt.Sprintf("%s: %v", dir, err))
		}
	}
	if len(errs) > 0 {
		return &Error{Msg: "some digests could not be made:\n  " + strings.Join(errs, "\n  ")}
	}
	return nil
}

func digestOne(ctx context.Context, env *Env, dir string, opts DigestOptions) error {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return err
	}
	now := r.now()
	sched, hasSchedule := r.digestSchedule()
	rec := r.loadDigest()
	if opts.Due {
		due := hasSchedule && r.st.Phase != PhaseCancelled && !r.cancelRequested() && sched.Prev(now, r.cfg.Location).After(rec.Last)
		if !due {
			r.close()
			return nil
		}
	}
	if !opts.Send {
		defer r.close()
		subject, text, _ := r.digest(rec, now)
		fmt.Fprintf(env.Stdout, "%s\n\n%s\n", subject, text)
		return nil
	}
	r.close()
	// Sending records an alert and the last digest: under the chamber's lock. A session
	// that holds it for long makes this digest wait for the next period (it says so).
	r, done, err := open(ctx, env, dir, openOptions{command: "digest", wait: true})
	if err != nil || done {
		return err
	}
	defer r.close()
	now = r.now()
	subject, text, _ := r.digest(rec, now)
	r.notify(ctx, r.st.Session, "digest", subject+"\n\n"+text)
	if err := r.saveChanged(); err != nil {
		r.warnf("%v", err)
	}
	return r.saveDigest(digestRecord{Last: ceilSecond(now).UTC(), Schedule: r.cfg.Digest})
}

func (r *runner) digestSchedule() (DigestSchedule, bool) {
	if r.cfg.Digest == "" {
		return DigestSchedule{}, false
	}
	d, err := ParseDigest(r.cfg.Digest)
	return d, err == nil
}

func (r *runner) loadDigest() digestRecord {
	var rec digestRecord
	if data, err := r.store.read(digestName, 1<<16); err == nil {
		_ = json.Unmarshal(data, &rec)
	}
	return rec
}

func (r *runner) saveDigest(rec digestRecord) error {
	data, _ := json.MarshalIndent(rec, "", "  ")
	return r.store.write(digestName, append(data, '\n'), nil)
}

// digest builds the digest of the period since rec.Last (one period back when there is none).
func (r *runner) digest(rec digestRecord, now time.Time) (subject, text string, c DigestCounts) {
	loc := r.cfg.Location
	from := rec.Last
	if sched, ok := r.digestSchedule(); ok && (from.IsZero() || from.Before(now.Add(-sched.Period()*5))) {
		from = now.Add(-sched.Period())
	} else if from.IsZero() {
		from = now.Add(-24 * time.Hour)
	}
	rows := r.historyRows(from, now)
	var b strings.Builder
	for _, row := range rows {
		c.Sessions++
		if row.Exit == 2 {
			c.Failures++
		}
		c.Replies += row.Replies
		c.Answered += row.Answered
		if row.Alert != "" {
			c.Alerts++
		}
	}
	subject = fmt.Sprintf("%s: digest, %d session(s), %d failure(s)", filepath.Base(r.dir), c.Sessions, c.Failures)
	fmt.Fprintf(&b, "Chamber %s\nFrom %s to %s (%s)\n\n", r.dir, from.In(loc).Format("2006-01-02 15:04"), now.In(loc).Format("2006-01-02 15:04"), loc)
	fmt.Fprintf(&b, "State: %s\n", r.digestState(now))
	fmt.Fprintf(&b, "Sessions run: %d\nFailures: %d\nReplies: %d (messages answered: %d)\nAlerts: %d\n", c.Sessions, c.Failures, c.Replies, c.Answered, c.Alerts)
	if spend := r.digestSpend(from, now); spend != "" {
		fmt.Fprintf(&b, "Spend: %s\n", spend)
	}
	if n := len(rows); n > 0 {
		last := rows[n-1]
		fmt.Fprintf(&b, "Last session: %d, %s: %s\n", last.Session, last.Outcome, termtext.OneLine(last.Summary, 200))
	}
	up := r.upcoming()
	if len(up) == 0 {
		b.WriteString("Upcoming: nothing is armed\n")
	} else {
		b.WriteString("Upcoming:\n")
		for i, u := range up {
			if i == 5 {
				fmt.Fprintf(&b, "  ... and %d more\n", len(up)-i)
				break
			}
			fmt.Fprintf(&b, "  %s  %-8s %s\n", u.At.In(loc).Format("2006-01-02 15:04"), u.Kind, termtext.OneLine(u.What, 120))
		}
	}
	return subject, b.String(), c
}

// digestState is the chamber's state in words, paused and stopped said plainly.
func (r *runner) digestState(now time.Time) string {
	st := r.st
	switch {
	case r.cancelRequested() || st.Phase == PhaseCancelled:
		return "cancelled: nothing will run"
	case st.Phase == PhasePaused && st.PausedUntil != nil:
		return fmt.Sprintf("paused until %s", st.PausedUntil.In(r.cfg.Location).Format("2006-01-02 15:04"))
	case st.Phase == PhasePaused:
		return "paused (cryochamber resume to go on)"
	case st.Phase == PhaseFailed:
		return "stopped: a session was refused (see cryochamber status)"
	case st.Phase == PhaseComplete:
		return "complete: the plan has ended"
	case st.RetryingSince != nil:
		return fmt.Sprintf("retrying since %s", st.RetryingSince.In(r.cfg.Location).Format("2006-01-02 15:04"))
	case st.Wake != nil:
		return fmt.Sprintf("%s, next wake %s (%s)", stateWord(st), st.Wake.In(r.cfg.Location).Format("2006-01-02 15:04"), Relative(*st.Wake, now))
	}
	return stateWord(st)
}

// digestSpend is the digest's line about what the sessions cost. It is empty until the spend
// ledger exists (another issue): the ledger fills it from its own records for [from, to).
func (r *runner) digestSpend(from, to time.Time) string { return "" }

// historyRows are the sessions that ended from the whole second of from up to to rounded up to
// a whole second, as the index records them, from the history index. A digest sent records
// that rounded-up end (under the lock, so no session ends meanwhile): a session is in one
// digest, never two.
func (r *runner) historyRows(from, to time.Time) []HistoryRow {
	from, to = from.Truncate(time.Second), ceilSecond(to)
	files, _ := filepath.Glob(r.store.path("history-*.jsonl"))
	sort.Strings(files)
	var rows []HistoryRow
	for _, f := range files {
		var year int
		if _, err := fmt.Sscanf(filepath.Base(f), "history-%d.jsonl", &year); err != nil || year < from.UTC().Year() || year > to.UTC().Year() {
			continue
		}
		// A file that cannot be read counts what was read of it (history_stream.go).
		_ = eachHistoryLine(f, HistoryOptions{Since: from.Add(-48 * time.Hour), Until: to}, func(row HistoryRow) error {
			if !row.Ended.Before(from) && !row.Ended.After(to) {
				rows = append(rows, row)
			}
			return nil
		})
	}
	return rows
}

// syncDigestTimer takes this chamber's digest schedule into force (start, reload) or out of it
// (cancel): the record of the last digest starts now when the schedule is new, and the user's
// one digest timer is rewritten with the times of every chamber that wants a digest (removed
// when none does).
func (r *runner) syncDigestTimer(ctx context.Context) {
	if r.unlocked {
		return
	}
	cancelled := r.cancelRequested() // a start clears it before this; a cancel sets it
	if r.cfg.Digest != "" && !cancelled {
		if rec := r.loadDigest(); rec.Schedule != r.cfg.Digest {
			if err := r.saveDigest(digestRecord{Last: r.now().UTC(), Schedule: r.cfg.Digest}); err != nil {
				r.warnf("cannot record the digest schedule: %v", err)
			}
		}
	}
	if r.cfg.Digest == "" {
		installed := false
		_ = r.withBackend(ctx, func(be timer.Backend) error { installed = timer.DigestInstalled(be); return nil })
		if !installed {
			return // no digest here, no digest timer: nothing to take in or out
		}
	}
	var cals []string
	var nexts []time.Time
	for _, dir := range readRegistry(r.env.Registry) {
		cfg, phase := r.cfg, PhaseArmed
		if cancelled {
			phase = PhaseCancelled
		}
		if dir != r.dir {
			o, _, err := open(ctx, r.env, dir, openOptions{unlocked: true})
			if err != nil {
				continue
			}
			cfg, phase = o.cfg, o.st.Phase
			if o.cancelRequested() {
				phase = PhaseCancelled
			}
			o.close()
		}
		if cfg.Digest == "" || phase == PhaseCancelled {
			continue
		}
		if d, err := ParseDigest(cfg.Digest); err == nil {
			cals = append(cals, d.OnCalendar(cfg.Location))
			nexts = append(nexts, d.Next(r.now(), cfg.Location))
		}
	}
	envFile := filepath.Join(r.env.StateDir, "digest.env")
	err := r.withBackend(ctx, func(be timer.Backend) error {
		if len(cals) == 0 {
			return timer.UninstallDigest(ctx, be)
		}
		vars := []string{"PATH=" + r.env.Getenv("PATH"), "HOME=" + r.env.Getenv("HOME")}
		if v, ok := lookupEnv(r.env.Environ, "XDG_STATE_HOME"); ok && v != "" {
			vars = append(vars, "XDG_STATE_HOME="+v)
		}
		data, err := timer.FormatEnvFile(vars)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(r.env.StateDir, 0o700); err != nil {
			return err
		}
		if err := writePrivate(envFile, data); err != nil {
			return err
		}
		return timer.InstallDigest(ctx, be, timer.DigestJob{Argv: []string{r.fallbackBinary(), "digest", "--all", "--due", "--send"}, Calendars: cals, EnvFile: envFile,
			Next: nexts, Env: vars, Stdout: filepath.Join(r.env.StateDir, "digest.out"), Stderr: filepath.Join(r.env.StateDir, "digest.err")})
	})
	switch {
	case err != nil && len(cals) > 0:
		r.warnf("cannot install the digest timer: %v", err)
	case err != nil:
		r.warnf("cannot remove the digest timer: %v", err)
	case r.cfg.Digest != "" && !cancelled:
		r.printf("digest timer armed: %s (%s)", r.cfg.Digest, r.cfg.Location)
	}
}

// writePrivate writes a 0600 file of the user's state directory atomically.
func writePrivate(path string, data []byte) error {
	return store(filepath.Dir(path)).write(filepath.Base(path), data, nil)
}
