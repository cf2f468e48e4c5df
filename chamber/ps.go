package chamber

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/flock"
	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/timer"
)

// The registry is the list of chambers this user has started: complete and failed chambers have
// no timers installed, so `ps` could not find them from the OS alone. It is a plain text file of
// absolute paths, one per line, in the user's state directory (Env.Registry).

// register adds dir to the registry (idempotent). A failure is reported but never stops a start.
func register(registry, dir string) error {
	return updateRegistry(registry, func(dirs []string) []string {
		if slices.Contains(dirs, dir) {
			return dirs
		}
		return append(dirs, dir)
	})
}

// unregister removes dir from the registry (a chamber whose timers were removed after it was
// deleted). Best effort, like register.
func unregister(registry, dir string) error {
	return updateRegistry(registry, func(dirs []string) []string {
		return slices.DeleteFunc(dirs, func(d string) bool { return d == dir })
	})
}

// updateRegistry rewrites the registry under its own lock (two starts at once must not lose an
// entry), atomically.
func updateRegistry(registry string, change func([]string) []string) error {
	if registry == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(registry), 0o700); err != nil {
		return err
	}
	l, err := flock.Wait(registry + ".lock")
	if err != nil {
		return err
	}
	defer l.Unlock()
	dirs := change(readRegistry(registry))
	sort.Strings(dirs)
	return atomicfile.Write(registry, []byte(strings.Join(dirs, "\n")+"\n"), 0o600)
}

func readRegistry(registry string) []string {
	f, err := os.Open(registry)
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	for sc.Scan() {
		if d := strings.TrimSpace(sc.Text()); filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// PsOptions are the options of `cryochamber ps`.
type PsOptions struct {
	JSON    bool
	Backend string
	// States, when set, keeps the parsed states between listings (ps_cache.go: the dashboard).
	States *StateCache
}

// PsRow is one chamber in `ps`.
type PsRow struct {
	Dir      string     `json:"dir"`
	ID       string     `json:"id"`
	State    string     `json:"state"` // armed, running, paused, retrying, complete, failed, cancelled, orphaned
	Phase    Phase      `json:"phase,omitempty"`
	Session  int        `json:"session"`
	Since    *time.Time `json:"running_since,omitempty"` // while a session runs
	NextWake *time.Time `json:"next_wake"`
	LastExit *int       `json:"last_exit"`
	Summary  string     `json:"last_summary,omitempty"`
	// Why the last session failed (no-exit, crashed, timeout, invalid, refused), where
	// cryochamber, not the agent, gave it its exit code.
	LastReason  string     `json:"last_reason,omitempty"`
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	Units       []string   `json:"timers"`
	Problem     string     `json:"problem,omitempty"`
	// While the fast retries are used up: since when, and how often (slow_retry).
	RetryingSince *time.Time `json:"retrying_since,omitempty"`
	SlowRetry     string     `json:"slow_retry,omitempty"`
	// Every alert target fails (targets.go): nothing reaches a person.
	ReachNobody bool `json:"alerts_reach_nobody,omitempty"`
}

// Ps lists every chamber of the user: those with timers installed in the OS and those in the
// registry, with a state. "orphaned" is a unit whose chamber is gone (or is not that chamber any
// more), or an active chamber whose wake timer is missing.
func Ps(ctx context.Context, env *Env, opts PsOptions) ([]PsRow, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	be, err := env.OpenBackend(cctx, opts.Backend)
	timedOut := cctx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		msg := "cannot reach the OS timer manager"
		if timedOut {
			msg = fmt.Sprintf("the OS timer manager did not answer within %s", connectTimeout)
		}
		return nil, &Error{Msg: msg, Err: err, Hint: backendHint(opts.Backend)}
	}
	defer be.Close()
	qctx, qcancel := context.WithTimeout(ctx, busTimeout)
	installed, err := be.Installed(qctx)
	qcancel()
	if err != nil {
		return nil, &Error{Msg: "cannot list the installed timers", Err: err}
	}
	qctx, qcancel = context.WithTimeout(ctx, busTimeout)
	be = prefetchWakes(qctx, be, installed) // status_prefetch.go: every wake timer read at once
	qcancel()
	byDir := map[string]*PsRow{}
	var rows []*PsRow
	row := func(dir string) *PsRow {
		if r, ok := byDir[dir]; ok {
			return r
		}
		r := &PsRow{Dir: dir, Units: []string{}}
		byDir[dir] = r
		rows = append(rows, r)
		return r
	}
	idsAt := map[string]string{}
	for _, in := range installed {
		dir := in.Dir
		if dir == "" {
			dir = "(unknown: " + in.ID + ")"
		}
		r := row(dir)
		r.ID = in.ID
		idsAt[dir] = in.ID
		for _, k := range in.Kinds {
			r.Units = append(r.Units, string(k))
		}
		if in.Watch {
			r.Units = append(r.Units, "inbox")
		}
	}
	for _, d := range readRegistry(env.Registry) {
		row(d)
	}
	now := env.Now()
	for _, r := range rows {
		r.classify(ctx, env, be, idsAt[r.Dir] != "", now, opts.States)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Dir < rows[j].Dir })
	out := make([]PsRow, 0, len(rows))
	for _, r := range rows {
		if r.State == "forgotten" {
			continue // deleted, with nothing of it left in the OS: nothing to show
		}
		out = append(out, *r)
	}
	return out, nil
}

func (r *PsRow) classify(ctx context.Context, env *Env, be timer.Backend, hasUnits bool, now time.Time, states *StateCache) {
	st, err := states.load(env, r.Dir) // ps_cache.go: loadStateAt without a cache
	if err != nil {
		if hasUnits {
			r.State = "orphaned"
			if errors.Is(err, ErrNoState) {
				r.Problem = "timers are installed but the chamber has no state; remove them with: cryochamber cancel --dir " + r.Dir
			} else {
				r.Problem = "timers are installed but the state cannot be read: " + err.Error()
			}
			return
		}
		r.State = "forgotten" // no state, no units: nothing of it is left to show
		return
	}
	if r.ID == "" {
		r.ID = chamberID(r.Dir)
	}
	r.Phase = st.Phase
	r.Session = st.Session
	if st.Last != nil {
		e := st.Last.Exit
		r.LastExit = &e
		r.Summary = st.Last.Summary
		r.LastReason = st.Last.Reason
	}
	r.State = stateWord(st)
	r.checkTargets(env) // targets.go
	if st.RetryingSince != nil {
		r.RetryingSince, r.SlowRetry = st.RetryingSince, fmtDur(slowRetryOf(env, r.ID))
	}
	switch st.Phase {
	case PhaseRunning:
		if h := st.Holder; h != nil && pidAlive(h.PID) {
			r.Since = &h.Since
			return
		}
		r.Problem = "a session died (the dead-man will recover it)"
	case PhaseArmed:
		r.NextWake = st.Wake
		qctx, cancel := context.WithTimeout(ctx, busTimeout)
		_, ok, err := ownBackend(qctx, env, be, st.Backend).Next(qctx, chamberID(r.Dir), timer.Wake) // ps_backend.go
		cancel()
		if err != nil || !ok {
			r.State = "orphaned"
			r.Problem = "the state says armed but the OS has no wake timer for it (run `cryochamber status --dir " + r.Dir + "`)"
		}
	case PhasePaused:
		r.PausedUntil = st.PausedUntil // NEXT WAKE stays empty: nothing wakes it before the resume
	}
	if !exists(r.Dir) {
		r.State = "missing"
		r.Problem = "the chamber directory is missing: moved, deleted or not mounted"
		if st.Phase.Active() {
			r.Problem += " (its dead-man alerts); if it moved: cryochamber cancel --dir " + r.Dir + ", then start it at its new place"
		}
		return
	}
	if !st.Phase.Active() && st.Phase != PhasePaused && hasUnits {
		r.State = "orphaned"
		r.Problem = fmt.Sprintf("the chamber is %s but timers are still installed", st.Phase)
	}
}

// slowRetryOf is the slow_retry of the chamber's accepted configuration (the default when it
// cannot be read).
func slowRetryOf(env *Env, id string) time.Duration {
	if s, err := storeFor(env, id); err == nil {
		if raw, err := s.read(acceptedConfig, maxConfigSize); err == nil {
			if c, err := ParseConfig(ConfigFile, raw, env.Local); err == nil {
				return c.SlowRetry.D
			}
		}
	}
	return DefaultSlowRetry
}

// loadStateAt reads the state of the chamber at the canonical path dir.
func loadStateAt(env *Env, dir string) (*State, error) {
	s, err := storeFor(env, chamberID(dir))
	if err != nil {
		return nil, err
	}
	return s.load()
}

// WritePs prints the rows as a table or JSON.
func WritePs(w io.Writer, rows []PsRow, asJSON bool, now time.Time) error {
	if asJSON {
		if rows == nil {
			rows = []PsRow{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "no chambers")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tSESSION\tNEXT WAKE\tLAST\tCHAMBER")
	for _, r := range rows {
		next := "-"
		if r.NextWake != nil {
			next = When(*r.NextWake, time.UTC, now)
		}
		last := "-"
		switch {
		case r.LastReason != "":
			last = r.LastReason // the agent printed no valid EXIT: its failure, not a made-up code
		case r.LastExit != nil:
			last = fmt.Sprintf("EXIT %d", *r.LastExit)
		}
		state := r.State
		switch {
		case r.Since != nil:
			state = fmt.Sprintf("running (session %d, %s)", r.Session, strings.TrimSuffix(Relative(*r.Since, now), " ago"))
		case r.RetryingSince != nil && r.State == "retrying":
			state = fmt.Sprintf("retrying every %s since %s", r.SlowRetry, When(*r.RetryingSince, time.UTC, now))
		case r.State == "paused" && r.PausedUntil != nil:
			state = "paused until " + When(*r.PausedUntil, time.UTC, now)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", state, r.Session, next, last, termtext.Line(r.Dir))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Problem != "" {
			problem := r.Problem
			if r.ReachNobody {
				problem = red(w, problem)
			}
			fmt.Fprintf(w, "%s: %s\n", termtext.Line(r.Dir), problem)
		}
	}
	return nil
}
