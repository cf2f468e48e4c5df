package chamber

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/marker"
)

// The history index: one JSON line per finished session, appended to a yearly file in the
// private state directory (history-2026.jsonl). A wake writes one line; `history` reads only
// the years it is asked for. The log keeps the sessions' text; the index keeps what a person
// asks of a long plan ("what did it do in March, and what did it cost").

// HistoryRow is one finished session. Its field names are those of status and ps.
type HistoryRow struct {
	Session  int       `json:"session"`
	Why      Why       `json:"reason"`          // what woke it: plan, retry, todo, inbox, requested, start
	Due      time.Time `json:"due"`             // when it was due
	Started  time.Time `json:"started"`         //
	Late     string    `json:"late"`            // how late it started (Go duration)
	Ended    time.Time `json:"ended"`           //
	Duration string    `json:"duration"`        // how long it ran (Go duration)
	Exit     int       `json:"exit"`            // 0, 1, 2
	Outcome  string    `json:"outcome"`         // ok, partial, failure, or why it failed (crashed, timeout, invalid, ...)
	Summary  string    `json:"summary"`         // the EXIT summary or the failure's detail
	Answered int       `json:"answered"`        // messages it answered
	Replies  int       `json:"replies"`         // REPLY markers
	TodosAdd int       `json:"todos_added"`     //
	Alert    string    `json:"alert,omitempty"` // the alert sent after it, if any
	NextWake string    `json:"next_wake,omitempty"`
	// Guardrail names the cryo.toml keys that moved or ended the wake after this session
	// ("min_interval", "quiet_hours", ...; guardrails.go).
	Guardrail string `json:"guardrail,omitempty"`
	// What the session used (ledger.go): null when unknown. usage_source says where it was
	// read: "agent" is the agent's own [CRYO:USAGE] claim; a preset's name, its CLI's output.
	TokensIn    *int64   `json:"tokens_in"`
	TokensOut   *int64   `json:"tokens_out"`
	CostUSD     *float64 `json:"cost_usd"`
	UsageSource string   `json:"usage_source,omitempty"`
	// FilesChanged: paths the session changed in the chamber (its snapshot against the one
	// before it); null when no snapshot was taken (snapshots = false, or it failed).
	FilesChanged *int `json:"files_changed"`
}

// historyFile is the index file of a year.
func (s store) historyFile(year int) string {
	return s.path(fmt.Sprintf("history-%d.jsonl", year))
}

// recordHistory appends session n to the index (best effort: the index is a convenience, the
// log is the record).
func (r *runner) recordHistory(f *finishing, m *marker.Result, stop string) {
	if r.unlocked || f.recorded {
		return // a session has one row, even when a cancel ends it after it was recorded
	}
	f.recorded = true
	n, o := f.n, f.o
	// The session has ended: a later one may be reported overdue again.
	r.store.clearFlag(fmt.Sprintf("overdue-%d", n))
	due := o.start
	if f.due != nil {
		due = *f.due
	}
	row := HistoryRow{
		Session: n, Why: r.st.Reason, Due: due.UTC(), Started: o.start.UTC(), Ended: o.end.UTC(),
		Late: max(o.start.Sub(due), 0).Round(time.Second).String(), Duration: o.end.Sub(o.start).Round(time.Second).String(),
		Exit: o.exit, Answered: f.answered, FilesChanged: f.filesChanged,
	}
	if r.st.Last != nil && r.st.Last.Session == n {
		row.Why = r.st.Last.Why
		row.Summary = r.st.Last.Summary
	}
	switch {
	case o.reason != Answered:
		row.Outcome = string(o.reason)
	case o.exit == 0:
		row.Outcome = "ok"
	case o.exit == 1:
		row.Outcome = "partial"
	default:
		row.Outcome = "failure"
	}
	if stop != "" {
		row.Outcome += "; " + stop
	}
	if m != nil {
		row.Replies = len(m.Replies)
		row.TodosAdd = len(m.Todos)
	}
	if r.st.Phase == PhaseArmed && r.st.Wake != nil {
		row.NextWake = r.st.Wake.UTC().Format(time.RFC3339)
	}
	row.Guardrail = r.guardKey
	r.bookUsage(f, &row, m) // ledger.go
	line, err := json.Marshal(row)
	if err != nil {
		return
	}
	file, err := os.OpenFile(r.store.historyFile(o.end.UTC().Year()), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		r.warnf("cannot record session %d in the history: %v", n, err)
		return
	}
	defer file.Close()
	if _, err := file.Write(append(line, '\n')); err != nil {
		r.warnf("cannot record session %d in the history: %v", n, err)
	}
}

// HistoryOptions are the options of `cryochamber history`.
type HistoryOptions struct {
	Dir   string
	Since time.Time // zero: everything
	Until time.Time // zero: up to now
	// Last, when above 0, keeps only the last Last sessions of the range (history's default
	// window): the index is read from its end, not decoded whole.
	Last int
}

// History lists the chamber's finished sessions, oldest first, from the index (EachHistory,
// collected: for callers that show a bounded number of rows).
func History(ctx context.Context, env *Env, opts HistoryOptions) ([]HistoryRow, error) {
	rows := []HistoryRow{}
	_, err := EachHistory(ctx, env, opts, func(r HistoryRow) error { rows = append(rows, r); return nil })
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// WriteHistory prints the rows as a table or JSON.
func WriteHistory(w io.Writer, rows []HistoryRow, asJSON bool, loc *time.Location) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(w, "no finished session in the history")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTARTED\tLATE\tTOOK\tWHY\tRESULT\tANSWERED\tTODOS\tFILES\tTOKENS\tCOST\tALERT\tSUMMARY")
	for _, r := range rows {
		result := fmt.Sprintf("EXIT %d %s", r.Exit, r.Outcome)
		alert := r.Alert
		if alert == "" {
			alert = "-"
		}
		files := "-"
		if r.FilesChanged != nil {
			files = strconv.Itoa(*r.FilesChanged)
		}
		tokens, cost := r.usageColumns() // ledger.go
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Session, r.Started.In(loc).Format("2006-01-02 15:04 MST"), r.Late, r.Duration,
			r.Why, result, r.Answered, r.TodosAdd, files, tokens, cost, alert, termtext.Line(clipBytes(strings.TrimSpace(r.Summary), 80)))
	}
	return tw.Flush()
}
