package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// Source is the dashboard's only way to the chambers: the chamber package's public API, the
// same calls the CLI makes, so that the pages show what `ps`, `status`, `history`, `log`,
// `validate` and `receive` print and change what `send`, `wake`, `pause`, `resume` and
// `cancel` change. It never opens a chamber's files itself. Each method is one seam: when the
// chamber package gains a call (the inbox and its archive, plan.md and NOTES.md), the dashboard
// gains a method here.
type Source struct {
	env chamber.Env // a template: every call works on a copy with its own output
	// states are the chambers' parsed states, kept against their files between requests
	// (chamber.StateCache): the overview parses only the states that changed.
	states *chamber.StateCache
}

// NewSource wraps the environment the CLI would use (clock, state directory, timer backend).
func NewSource(env *chamber.Env) *Source {
	return &Source{env: *env, states: chamber.NewStateCache()}
}

// view is one request's read-only access to the chambers (ps, status, validate, history, log,
// the outbox). Its calls share one connection per timer backend, opened at the first call
// that needs it and closed by close (an overview of 100 chambers would otherwise connect to
// the user manager 101 times), and that connection remembers what the OS said about each
// timer. Changes never go through a view (but for status's start of the wake service when an
// inbox watcher is lost, chamber/watcher.go): they use the Source's own environment, with the
// backend as it is (all of its optional abilities: FireAt, sync's Poller, ...).
type view struct {
	env      chamber.Env
	mu       sync.Mutex
	backends map[string]timer.Backend
	memo     *memo
	states   *chamber.StateCache
}

func (s *Source) open() *view {
	v := &view{env: s.env, backends: map[string]timer.Backend{}, memo: &memo{ans: map[memoKey]*answer{}}, states: s.states}
	open := s.env.OpenBackend
	v.env.OpenBackend = func(ctx context.Context, name string) (timer.Backend, error) {
		v.mu.Lock()
		defer v.mu.Unlock()
		if be, ok := v.backends[name]; ok {
			return shared{be, name, v.memo}, nil
		}
		be, err := open(ctx, name)
		if err != nil {
			return nil, err
		}
		v.backends[name] = be
		return shared{be, name, v.memo}, nil
	}
	return v
}

func (v *view) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, be := range v.backends {
		be.Close()
	}
	clear(v.backends)
}

// shared is a view's backend connection: the view closes it, not its user, and within the
// view (one request) it remembers each answer about a timer, because `ps` and `status` ask
// about the same timers and each answer is a round trip that the user manager serves one at a
// time. It answers Read as the timer package would (the backend's own Read, else the
// package's fallback over Next), so that status and validate see what they would see without
// it.
type shared struct {
	timer.Backend
	name string // the name it was opened by
	memo *memo
}

func (shared) Close() error { return nil }

type memoKey struct {
	backend, id string
	kind        timer.Kind
	read        bool // Read, else Next
}

// answer is one remembered answer, or the call in progress that will give it (done is closed
// when it has): two callers asking at once share one round trip.
type answer struct {
	done    chan struct{}
	at      time.Time
	reading timer.Reading
	ok      bool
	err     error
}

type memo struct {
	mu  sync.Mutex
	ans map[memoKey]*answer
}

// once returns the remembered answer for key, or asks with call. An error is not remembered:
// the next caller asks again.
func (m *memo) once(ctx context.Context, key memoKey, call func(a *answer)) *answer {
	m.mu.Lock()
	a, ok := m.ans[key]
	if !ok {
		a = &answer{done: make(chan struct{})}
		m.ans[key] = a
	}
	m.mu.Unlock()
	if ok {
		select {
		case <-a.done:
			return a
		case <-ctx.Done():
			return &answer{err: ctx.Err()}
		}
	}
	call(a)
	close(a.done)
	if a.err != nil {
		m.mu.Lock()
		if m.ans[key] == a {
			delete(m.ans, key)
		}
		m.mu.Unlock()
	}
	return a
}

func (s shared) Next(ctx context.Context, id string, k timer.Kind) (time.Time, bool, error) {
	a := s.memo.once(ctx, memoKey{s.name, id, k, false}, func(a *answer) {
		a.at, a.ok, a.err = s.Backend.Next(ctx, id, k)
	})
	return a.at, a.ok, a.err
}

// Installed is the backend's list, and then the wake timer of every chamber in it read back
// at once (timer.NextAll: on systemd one ListUnitsByNames, then every next elapse asked for
// together) into the view's answers: `ps`, which lists first and then asks about each armed
// chamber's wake, finds them there instead of asking a hundred times, one after another
// (issue 28). Each answer is still the OS's, read within this request.
func (s shared) Installed(ctx context.Context) ([]timer.Installed, error) {
	ins, err := s.Backend.Installed(ctx)
	if err != nil {
		return ins, err
	}
	if _, ok := s.Backend.(timer.AllNexter); !ok || len(ins) == 0 {
		return ins, nil
	}
	refs := make([]timer.Ref, 0, len(ins))
	for _, in := range ins {
		refs = append(refs, timer.Ref{ID: in.ID, Kind: timer.Wake})
	}
	got := timer.NextAll(ctx, s.Backend, refs)
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	for i, r := range refs {
		key := memoKey{s.name, r.ID, r.Kind, false}
		if _, asked := s.memo.ans[key]; asked || got[i].Err != nil {
			continue // an error is not remembered: ps asks again
		}
		a := &answer{done: make(chan struct{}), at: got[i].At, ok: got[i].OK}
		close(a.done)
		s.memo.ans[key] = a
	}
	return ins, nil
}

// Read makes shared a timer.Reader whatever the backend is.
func (s shared) Read(ctx context.Context, id string, k timer.Kind) (timer.Reading, bool, error) {
	a := s.memo.once(ctx, memoKey{s.name, id, k, true}, func(a *answer) {
		if rd, ok := s.Backend.(timer.Reader); ok {
			a.reading, a.ok, a.err = rd.Read(ctx, id, k)
			return
		}
		// The package's own fallback, over the remembered Next.
		a.reading, a.ok, a.err = timer.Read(ctx, backendOnly{s}, id, k)
	})
	return a.reading, a.ok, a.err
}

// backendOnly shows a backend as the bare interface, without its optional ones.
type backendOnly struct{ timer.Backend }

// with returns a copy of the view's environment that prints to out.
func (v *view) with(out io.Writer) *chamber.Env {
	e := v.env
	e.Stdout, e.Stderr = out, io.Discard
	return &e
}

// ps is `cryochamber ps --json`.
func (v *view) ps(ctx context.Context) ([]chamber.PsRow, error) {
	return chamber.Ps(ctx, v.with(io.Discard), chamber.PsOptions{JSON: true, States: v.states})
}

// status is `cryochamber status --json`.
func (v *view) status(ctx context.Context, dir string) (*chamber.StatusInfo, error) {
	return chamber.Status(ctx, v.with(io.Discard), chamber.StatusOptions{Dir: dir, Tail: 10})
}

// summary is a chamber's status without the questions to the timer manager and without the
// latest block (chamber.StatusOptions.Quick): what the overview of many chambers shows. A
// chamber's own page asks for everything (status).
func (v *view) summary(ctx context.Context, dir string) (*chamber.StatusInfo, error) {
	return chamber.Status(ctx, v.with(io.Discard), chamber.StatusOptions{Dir: dir, Quick: true})
}

// validate is `cryochamber validate --json`: the checks of the latest block, read-only.
func (v *view) validate(ctx context.Context, dir string) (*validate.Report, error) {
	return chamber.Validate(ctx, v.with(io.Discard), chamber.ValidateOptions{Dir: dir}, nil)
}

// history is the chamber's sessions from since to until (zero: open), oldest first.
func (v *view) history(ctx context.Context, dir string, since, until time.Time) ([]chamber.HistoryRow, error) {
	return chamber.History(ctx, v.with(io.Discard), chamber.HistoryOptions{Dir: dir, Since: since, Until: until})
}

// location is the chamber's time zone (cryo.toml's timezone, else the system's): the zone its
// times without an offset are read in.
func (v *view) location(ctx context.Context, dir string) *time.Location {
	return chamber.ChamberLocation(ctx, v.with(io.Discard), dir)
}

// conversation is the chamber's messages both ways, oldest first (chamber.Conversation): what
// the operator sent (inbox, archive) and what came back (outbox). It marks nothing read.
func (v *view) conversation(ctx context.Context, dir string) ([]chamber.ReceivedMessage, error) {
	return chamber.Conversation(ctx, v.with(io.Discard), dir, maxMessages)
}

// messages is `cryochamber receive --all --json`: every outbox message (the agent's replies,
// cryochamber's replies on its behalf, alerts, notices), as the API's messages route gives them.
// Like `receive`, it marks them read (in the state directory).
func (v *view) messages(ctx context.Context, dir string) ([]chamber.ReceivedMessage, error) {
	var out bytes.Buffer
	err := chamber.Receive(ctx, v.with(&out), chamber.ReceiveOptions{Dir: dir, All: true, JSON: true})
	var list []chamber.ReceivedMessage
	if out.Len() > 0 {
		// Printed before a failure to mark them read: still what the outbox holds.
		if jerr := json.Unmarshal(out.Bytes(), &list); jerr != nil && err == nil {
			err = jerr
		}
	}
	return list, err
}

// log is `cryochamber log [--session N] [--follow]` into w.
func (v *view) log(ctx context.Context, dir string, session int, follow bool, w io.Writer) error {
	return chamber.PrintLog(ctx, v.with(w), chamber.LogOptions{Dir: dir, Session: session, Follow: follow})
}

// SendRequest is the body of POST .../send: the flags of `cryochamber send`.
type SendRequest struct {
	Text    string `json:"text"`
	From    string `json:"from,omitempty"`
	Subject string `json:"subject,omitempty"`
	Wake    bool   `json:"wake,omitempty"`
}

// change runs one change through the chamber API with the Source's environment and returns
// what the CLI would print.
func (s *Source) change(fn func(env *chamber.Env) error) (string, error) {
	var out bytes.Buffer
	e := s.env
	e.Stdout, e.Stderr = &out, io.Discard
	err := fn(&e)
	return strings.TrimSpace(out.String()), err
}

// send is `cryochamber send [--wake]`.
func (s *Source) send(ctx context.Context, dir string, r SendRequest) (string, error) {
	return s.change(func(env *chamber.Env) error {
		return chamber.Send(ctx, env, chamber.SendOptions{Dir: dir, Text: r.Text, From: r.From, Subject: r.Subject, Wake: r.Wake})
	})
}

// pause is `cryochamber pause [--until T]`.
func (s *Source) pause(ctx context.Context, dir, until string) (string, error) {
	return s.change(func(env *chamber.Env) error {
		return chamber.Pause(ctx, env, chamber.PauseOptions{Dir: dir, Until: until})
	})
}

// resume is `cryochamber resume`. What fell due during the pause is armed a few seconds
// ahead: the OS timer runs it, not this process.
func (s *Source) resume(ctx context.Context, dir string) (string, error) {
	return s.change(func(env *chamber.Env) error {
		return chamber.Resume(ctx, env, chamber.ResumeOptions{Dir: dir})
	})
}

// wakeAt is `cryochamber wake --at T`: it moves the plan's next wake and runs nothing.
func (s *Source) wakeAt(ctx context.Context, dir, at string) (string, error) {
	return s.change(func(env *chamber.Env) error {
		return chamber.Wake(ctx, env, chamber.WakeOptions{Dir: dir, At: at})
	})
}

// cancel is `cryochamber cancel`.
func (s *Source) cancel(ctx context.Context, dir string) (string, error) {
	return s.change(func(env *chamber.Env) error {
		return chamber.Cancel(ctx, env, chamber.CancelOptions{Dir: dir})
	})
}

// wakeNow is `cryochamber wake --now --dir DIR` started by the OS timer manager (the chamber's
// wake service, as `send --wake` does): the session runs there, not in this process, and this
// returns at once.
func (s *Source) wakeNow(ctx context.Context, dir string, out io.Writer) error {
	e := s.env
	e.Stdout, e.Stderr = out, out
	if err := chamber.RequestWake(ctx, &e, dir); err != nil {
		return err
	}
	fmt.Fprintln(out, "woke the chamber: a session starts now")
	return nil
}
