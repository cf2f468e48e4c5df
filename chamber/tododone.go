package chamber

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/validate"
)

// A TODO finished otherwise than by its own session: the agent marks it done with
// [CRYO:TODO-DONE <id>], the operator with `cryochamber todo done|remove <id>`.

// doneTodos applies the TODO-DONE markers of session n: each names a pending TODO (or one this
// session claimed), which is done. An ID that names no such TODO is said and ignored: the
// agent may repeat a marker of an earlier session.
func (r *runner) doneTodos(n int, done []marker.TodoDone) error {
	if len(done) == 0 {
		return nil
	}
	l := r.loadTodos()
	changed := false
	for _, d := range done {
		i := todoIndex(l, d.ID)
		if i < 0 || !(l.Items[i].Status == "pending" || l.Items[i].Status == "claimed" && l.Items[i].Session == n) {
			r.printf("TODO-DONE %s (line %d): no pending TODO has that ID; ignored", d.ID, d.Line)
			continue
		}
		l.Items[i].Status, l.Items[i].Session = "done", n
		changed = true
		r.printf("TODO %s marked done by session %d: %s", d.ID, n, termtext.Line(clipBytes(l.Items[i].Text, 80)))
	}
	if !changed {
		return nil
	}
	return r.saveTodos(l)
}

func todoIndex(l *todoList, id string) int {
	for i, t := range l.Items {
		if t.ID == id {
			return i
		}
	}
	return -1
}

// TodoList is `cryochamber todo list`: every TODO of the chamber (pending, claimed, and the
// latest done ones), in the order they are due.
func TodoList(ctx context.Context, env *Env, dir string) ([]Todo, error) {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return nil, err
	}
	defer r.close()
	l, err := r.readTodos()
	if err != nil {
		return nil, &Error{Msg: "cannot read the TODOs", Err: err}
	}
	return append([]Todo{}, l.Items...), nil
}

// WriteTodos prints the TODOs as a table or as a JSON array.
func WriteTodos(w io.Writer, items []Todo, asJSON bool, loc *time.Location, now time.Time) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	if len(items) == 0 {
		fmt.Fprintln(w, "no TODOs")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tDUE\tTEXT")
	for _, t := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termtext.Line(t.ID), t.Status, When(t.At, loc, now), termtext.Line(clipBytes(strings.TrimSpace(t.Text), 80)))
	}
	return tw.Flush()
}

// TodoOptions are the options of `cryochamber todo done|remove`.
type TodoOptions struct {
	Dir    string
	ID     string
	Remove bool // remove it from the list rather than mark it done
}

// TodoChange is `cryochamber todo done|remove ID`: the operator finishes (or drops) a pending
// TODO. When the armed wake was for it, the wake is armed again for what comes next.
func TodoChange(ctx context.Context, env *Env, opts TodoOptions) error {
	what := "done"
	if opts.Remove {
		what = "remove"
	}
	r, done, err := open(ctx, env, opts.Dir, openOptions{command: "todo " + what, wait: true})
	if err != nil {
		return err
	}
	if done {
		return failErr("run it again when the session has finished", "a session is running")
	}
	defer r.close()
	l, err := r.readTodos()
	if err != nil {
		return &Error{Msg: "cannot read the TODOs", Err: err}
	}
	i := todoIndex(l, opts.ID)
	switch {
	case i < 0:
		return usageErr("`cryochamber todo list --dir "+r.dir+"` lists the IDs", "no TODO has the ID %q", opts.ID)
	case l.Items[i].Status == "claimed":
		return failErr("wait for the session to end", "TODO %s is being worked on by session %d", opts.ID, l.Items[i].Session)
	case l.Items[i].Status == "done" && !opts.Remove:
		r.printf("TODO %s is already done", opts.ID)
		return nil
	}
	t := l.Items[i]
	if opts.Remove {
		l.Items = append(l.Items[:i], l.Items[i+1:]...)
	} else {
		l.Items[i].Status = "done"
	}
	r.todos = nil
	if err := r.saveTodos(l); err != nil {
		return &Error{Msg: "cannot save the TODOs", Err: err}
	}
	verb := map[bool]string{false: "marked done", true: "removed"}[opts.Remove]
	r.logNote(fmt.Sprintf("the operator %s TODO %s", verb, t.ID))
	r.printf("TODO %s %s: %s", t.ID, verb, termtext.Line(clipBytes(t.Text, 80)))
	if t.Status != "pending" {
		return nil
	}
	return r.rearmAfterTodo(ctx, t)
}

// rearmAfterTodo arms the wake again when it was the TODO's: the next is the plan's wake or an
// earlier pending TODO.
func (r *runner) rearmAfterTodo(ctx context.Context, t Todo) error {
	if r.st.Reason != WhyTodo || r.st.Wake == nil || !(r.st.Phase == PhaseArmed || r.st.Phase == PhasePaused) {
		return nil
	}
	now := r.now()
	next, why := r.st.PlanWake, WhyPlan
	if p, w := r.pendingWake(now); p != nil && (next == nil || p.Before(*next)) {
		next, why = p, w
	}
	if next == nil || next.Equal(*r.st.Wake) {
		return nil
	}
	if next.Before(now.Add(armLead)) {
		n := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		next = &n
	}
	if r.st.Phase == PhaseArmed {
		rep := validate.New(io.Discard)
		rep.SetWake(*next)
		if err := r.arm(ctx, rep, *next); err != nil {
			return &Error{Msg: "cannot arm the next wake; the previous timers may be gone", Err: err, Hint: "cryochamber status --dir " + r.dir + " shows what is armed"}
		}
	}
	r.st.Wake, r.st.Reason = next, why
	if err := r.save(); err != nil {
		return err
	}
	r.printf("next wake: %s (%s)", next.In(r.cfg.Location).Format(time.RFC3339), why)
	return nil
}
