package chamber

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// todoName (in the private state directory) keeps the agent's TODOs: extra future wakes with
// their own task. The chamber holds a view of it (todo.json) for the agent to read.

// maxTodoRetryDelay caps the 2^k-minute backoff of a TODO whose session failed.
const maxTodoRetryDelay = 24 * time.Hour

// keepDone is how many finished TODOs todo.json keeps; older ones are moved to a yearly archive
// in the private state directory, so what a wake reads stays small however long the plan runs.
const keepDone = 100

// Todo is one item of todo.json.
type Todo struct {
	ID      string    `json:"id"`     // deterministic: s<session>-<k>, retries add -a<attempt>
	Text    string    `json:"text"`   // the task
	At      time.Time `json:"at"`     // when it is due (UTC)
	Status  string    `json:"status"` // pending, claimed, done
	Attempt int       `json:"attempt,omitempty"`
	Session int       `json:"session,omitempty"` // the session that claimed it
	Created time.Time `json:"created"`
}

type todoList struct {
	Version int    `json:"version"`
	Items   []Todo `json:"items"`
}

// loadTodos reads the TODOs once per command (an unreadable file counts as none, with a
// warning).
func (r *runner) loadTodos() *todoList {
	if r.todos != nil {
		return r.todos
	}
	l, err := r.readTodos()
	if err != nil {
		r.warnf("%v; TODOs are ignored until it is repaired", err)
		l = &todoList{Version: 1}
	}
	r.todos = l
	return l
}

func (r *runner) readTodos() (*todoList, error) {
	data, err := r.store.read(todoName, maxStateSize)
	if errors.Is(err, os.ErrNotExist) {
		return &todoList{Version: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	var l todoList
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %v", r.store.path(todoName), err)
	}
	for i, t := range l.Items {
		switch t.Status {
		case "pending", "claimed", "done":
		default:
			return nil, fmt.Errorf("%s: item %d: unknown status %q", r.store.path(todoName), i, t.Status)
		}
	}
	return &l, nil
}

// saveTodos compacts the list (finished items beyond keepDone go to the archive), writes it to
// the private state directory, then its view to the chamber.
func (r *runner) saveTodos(l *todoList) error {
	l.Version = 1
	r.compactTodos(l)
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if len(data) >= maxStateSize {
		return fmt.Errorf("todo.json would be %d bytes, more than its reader accepts: too many pending TODOs", len(data))
	}
	if err := r.store.write(todoName, append(data, '\n'), nil); err != nil {
		return err
	}
	r.todos = l
	if r.fs != nil {
		if err := r.fs.WriteView(todoName, append(data, '\n'), 0o600); err != nil {
			r.warnf("cannot update the view %s in the chamber: %v", todoName, err)
		}
	}
	return nil
}

// compactTodos moves finished items beyond the keepDone most recent to the yearly archive
// (append-only JSON lines in the private state directory).
func (r *runner) compactTodos(l *todoList) {
	var done []int
	for i, t := range l.Items {
		if t.Status == "done" {
			done = append(done, i)
		}
	}
	if len(done) <= keepDone {
		return
	}
	drop := map[int]bool{}
	for _, i := range done[:len(done)-keepDone] {
		drop[i] = true
	}
	byYear := map[int][]byte{}
	var kept []Todo
	for i, t := range l.Items {
		if !drop[i] {
			kept = append(kept, t)
			continue
		}
		line, _ := json.Marshal(t)
		byYear[t.At.Year()] = append(append(byYear[t.At.Year()], line...), '\n')
	}
	for year, lines := range byYear {
		name := r.store.path(fmt.Sprintf("%s-%d.jsonl", todoArchive, year))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			r.warnf("cannot archive finished TODOs: %v", err)
			return // keep them all rather than lose any
		}
		_, werr := f.Write(lines)
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			r.warnf("cannot archive finished TODOs: %v", err)
			return
		}
	}
	l.Items = kept
}

// claimTodos claims every pending TODO that is due, for the session about to start. Items
// already claimed for that same session number (a session whose process died before it
// started) are claimed again: they were never shown.
func (r *runner) claimTodos(now time.Time) ([]Todo, error) {
	l := r.loadTodos()
	n := r.st.Session
	var claimed []Todo
	changed := false
	for i := range l.Items {
		t := &l.Items[i]
		switch {
		case t.Status == "pending" && !now.Before(t.At.Add(-dueTolerance)):
			t.Status, t.Session = "claimed", n
			changed = true
			claimed = append(claimed, *t)
		case t.Status == "claimed" && t.Session == n:
			claimed = append(claimed, *t)
		}
	}
	if changed {
		if err := r.saveTodos(l); err != nil {
			return nil, &Error{Msg: "cannot claim TODOs", Err: err}
		}
	}
	return claimed, nil
}

// finishTodos marks the TODOs claimed by session f done; when the session failed, each becomes
// a new item "(attempt k)" due 2^k minutes later (at most a day). Idempotent.
func (r *runner) finishTodos(f *finishing) error {
	n, o := f.n, f.o
	l := r.loadTodos()
	have := map[string]bool{}
	for _, t := range l.Items {
		have[t.ID] = true
	}
	changed := false
	end := o.end.UTC()
	if end.IsZero() {
		end = r.now().UTC()
	}
	for i := range l.Items {
		t := l.Items[i]
		if t.Status != "claimed" || t.Session != n {
			continue
		}
		l.Items[i].Status = "done"
		changed = true
		if !o.failed() && o.reason != EndInvalid {
			continue
		}
		k := t.Attempt + 1
		id := fmt.Sprintf("%s-a%d", baseTodoID(t.ID), k)
		if have[id] {
			continue
		}
		delay := min(time.Duration(1<<min(k, 20))*time.Minute, maxTodoRetryDelay)
		l.Items = append(l.Items, Todo{ID: id, Text: baseTodoText(t) + fmt.Sprintf(" (attempt %d)", k), At: end.Add(delay), Status: "pending", Attempt: k, Created: end})
		have[id] = true
	}
	if !changed {
		return nil
	}
	return r.saveTodos(l)
}

// baseTodoID strips a retry suffix so attempts stay s3-1-a1, s3-1-a2, ...
func baseTodoID(id string) string {
	if i := strings.LastIndex(id, "-a"); i > 0 && !strings.Contains(id[i+2:], "-") {
		return id[:i]
	}
	return id
}

func baseTodoText(t Todo) string {
	return strings.TrimSuffix(t.Text, fmt.Sprintf(" (attempt %d)", t.Attempt))
}

// addTodos records the TODO markers of session f. IDs are derived from the session and the
// marker's position, so recording the same session twice adds nothing; a TODO that repeats a
// pending one (same text, same time: a plan restarted after a cancel) is not added twice, nor is
// a relative TODO of the session that restarts a plan whose text a pending TODO has.
func (r *runner) addTodos(f *finishing, validAt time.Time) error {
	n, todos := f.n, f.m.Todos
	if len(todos) == 0 {
		return nil
	}
	l := r.loadTodos()
	have := map[string]bool{}
	for _, t := range l.Items {
		have[t.ID] = true
		if t.Status == "pending" {
			have[t.Text+"\x00"+t.At.UTC().Format(time.RFC3339)] = true
			have[t.Text+"\x00carried"] = true
		}
	}
	// The session that starts a plan again (after a cancel, a completion, a refusal) finds the
	// pending TODOs of the run before it. A relative TODO it prints (+1d) never resolves to the
	// same time twice, so the exact match above cannot see that it is the one already pending:
	// the same text is the same TODO, which keeps its time (issue 23, item 4).
	restart := f.why == WhyStart
	for k, mt := range todos {
		id := fmt.Sprintf("s%d-%d", n, k+1)
		at := mt.Time.Resolve(validAt).UTC()
		key := mt.Text + "\x00" + ceilSecond(at).Format(time.RFC3339)
		if have[id] || have[key] || restart && mt.Time.Relative() && have[mt.Text+"\x00carried"] {
			continue
		}
		have[key] = true
		l.Items = append(l.Items, Todo{ID: id, Text: mt.Text, At: ceilSecond(at), Status: "pending", Created: validAt.UTC()})
	}
	sort.SliceStable(l.Items, func(i, j int) bool { return l.Items[i].At.Before(l.Items[j].At) })
	return r.saveTodos(l)
}

// earliestTodo is the due time of the earliest pending TODO.
func (r *runner) earliestTodo() *time.Time {
	var best *time.Time
	for _, t := range r.loadTodos().Items {
		if t.Status == "pending" && (best == nil || t.At.Before(*best)) {
			at := t.At
			best = &at
		}
	}
	return best
}

// pendingWake is the earliest time something other than WAKE needs a session: a pending TODO,
// or a message waiting in the inbox (watch_inbox). A time already due is moved armLead ahead.
func (r *runner) pendingWake(now time.Time) (*time.Time, Why) {
	best, why := r.earliestTodo(), WhyTodo
	if best == nil {
		why = ""
	}
	if *r.cfg.WatchInbox && r.inboxCount() > 0 && (best == nil || now.Before(*best)) {
		t := now
		best, why = &t, WhyInbox
	}
	if best != nil && best.Before(now.Add(armLead)) {
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		best = &t
	}
	return best, why
}
