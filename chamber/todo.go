package chamber

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/cryochamber/cryochamber/marker"
)

// TodoFile keeps the agent's TODOs: extra future wakes with their own task.
const TodoFile = "todo.json"

// maxTodoRetryDelay caps the 2^k-minute backoff of a TODO whose session failed.
const maxTodoRetryDelay = 24 * time.Hour

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

func (r *runner) loadTodos() (*todoList, error) {
	data, err := readBounded(r.path(TodoFile), maxStateSize)
	if errors.Is(err, os.ErrNotExist) {
		return &todoList{Version: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	var l todoList
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %v", TodoFile, err)
	}
	for i, t := range l.Items {
		switch t.Status {
		case "pending", "claimed", "done":
		default:
			return nil, fmt.Errorf("%s: item %d: unknown status %q", TodoFile, i, t.Status)
		}
	}
	return &l, nil
}

func (r *runner) saveTodos(l *todoList) error {
	l.Version = 1
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return atomicWrite(r.path(TodoFile), append(data, '\n'), 0o600)
}

// Todos lists the chamber's TODOs (for status).
func (r *runner) Todos() []Todo {
	l, err := r.loadTodos()
	if err != nil {
		return nil
	}
	return l.Items
}

// claimTodos claims every pending TODO that is due, for the session about to start. Items
// already claimed for that same session number (a session whose process died before it
// started) are claimed again: they were never shown.
func (r *runner) claimTodos(now time.Time) ([]Todo, error) {
	l, err := r.loadTodos()
	if err != nil {
		r.printf("warning: %v; TODOs are not claimed this session", err)
		return nil, nil
	}
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
			return nil, &Error{Status: 1, Msg: "cannot claim TODOs", Err: err}
		}
	}
	return claimed, nil
}

// finishTodos marks the TODOs claimed by session n done; when the session failed, each becomes
// a new item "(attempt k)" due 2^k minutes later (at most a day). Idempotent.
func (r *runner) finishTodos(n int, o outcome) error {
	l, err := r.loadTodos()
	if err != nil {
		return err
	}
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
		if !o.failed() && o.reason != "invalid" {
			continue
		}
		k := t.Attempt + 1
		id := fmt.Sprintf("%s-a%d", baseTodoID(t.ID), k)
		if have[id] {
			continue
		}
		delay := time.Duration(1<<min(k, 20)) * time.Minute
		if delay > maxTodoRetryDelay {
			delay = maxTodoRetryDelay
		}
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
	for i := len(id) - 1; i > 0; i-- {
		if id[i] == '-' && i+1 < len(id) && id[i+1] == 'a' {
			return id[:i]
		}
		if id[i] == '-' {
			break
		}
	}
	return id
}

func baseTodoText(t Todo) string {
	suffix := fmt.Sprintf(" (attempt %d)", t.Attempt)
	if t.Attempt > 0 && len(t.Text) > len(suffix) && t.Text[len(t.Text)-len(suffix):] == suffix {
		return t.Text[:len(t.Text)-len(suffix)]
	}
	return t.Text
}

// addTodos records the TODO markers of session n. IDs are derived from the session and the
// marker's position, so recording the same session twice adds nothing.
func (r *runner) addTodos(n int, todos []marker.Todo, validAt time.Time) error {
	if len(todos) == 0 {
		return nil
	}
	l, err := r.loadTodos()
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, t := range l.Items {
		have[t.ID] = true
	}
	for k, mt := range todos {
		id := fmt.Sprintf("s%d-%d", n, k+1)
		if have[id] {
			continue
		}
		l.Items = append(l.Items, Todo{ID: id, Text: mt.Text, At: mt.Time.Resolve(validAt).UTC(), Status: "pending", Created: validAt.UTC()})
	}
	sort.SliceStable(l.Items, func(i, j int) bool { return l.Items[i].At.Before(l.Items[j].At) })
	return r.saveTodos(l)
}

// earliestTodo is the due time of the earliest pending TODO.
func (r *runner) earliestTodo() *time.Time {
	l, err := r.loadTodos()
	if err != nil {
		return nil
	}
	var best *time.Time
	for _, t := range l.Items {
		if t.Status == "pending" && (best == nil || t.At.Before(*best)) {
			at := t.At
			best = &at
		}
	}
	return best
}

// pendingWake is the earliest time something other than WAKE needs a session: a pending TODO,
// or a message waiting in the inbox (watch_inbox). A time already due is moved armLead ahead.
func (r *runner) pendingWake(now time.Time) (*time.Time, string) {
	best, why := r.earliestTodo(), "todo"
	if best == nil {
		why = ""
	}
	if *r.cfg.WatchInbox && inboxCount(r.dir) > 0 && (best == nil || now.Before(*best)) {
		t := now
		best, why = &t, "inbox"
	}
	if best != nil && best.Before(now.Add(armLead)) {
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		best = &t
	}
	return best, why
}
