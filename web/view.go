package web

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// What the pages show. Every string from a chamber (summaries, plan notes, messages, log lines,
// validation details) reaches the page through html/template, which escapes it for where it
// lands; no value is ever marked as trusted HTML, and nothing an agent wrote becomes a link.

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets/app.js assets/style.css assets/icon.svg
var assetFS embed.FS

// assets is everything served under /assets/: the embedded files, by exact name.
var assets = map[string]string{
	"app.js":    "text/javascript; charset=utf-8",
	"style.css": "text/css; charset=utf-8",
	"icon.svg":  "image/svg+xml",
}

func serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ct, ok := assets[name]
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	}
	data, err := assetFS.ReadFile("assets/" + name)
	if err != nil {
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

// parsePages parses each page with the shared layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "chamber", "error"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("web: templates: %w", err)
		}
		pages[name] = t
	}
	return pages, nil
}

var funcs = template.FuncMap{
	// when prints an instant in UTC to the second, the form `status` uses.
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if v == nil {
				return "-"
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		}
		return "-"
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"rel": func(t any, now time.Time) string {
		switch v := t.(type) {
		case time.Time:
			return chamber.Relative(v, now)
		case *time.Time:
			if v != nil {
				return chamber.Relative(*v, now)
			}
		}
		return ""
	},
	"deref": func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	},
	"at": func(p *time.Time) time.Time {
		if p == nil {
			return time.Time{}
		}
		return *p
	},
	"join": strings.Join,
}

// pageData is what the layout needs, and the page's own data.
type pageData struct {
	Title     string
	Page      string // overview, chamber, error
	ChamberID string
	Token     string // for the page's script: a POST carries it in a header
	Now       time.Time
	Data      any
}

type errorData struct {
	Code      int
	Msg, Hint string
}

type overviewData struct {
	Chambers []chamberRow
	Count    map[string]int
}

// chamberRow is one chamber as the overview shows it.
type chamberRow struct {
	ID, Name, Dir string
	Linked        bool   // the chamber has a page (its directory is known)
	State         string // armed, running, paused, retrying, complete, failed, cancelled, orphaned
	Session       int
	Next          *time.Time
	NextReason    string
	Fallback      *time.Time // the dead-man timer, as the OS reports it
	Todos         int
	LastExit      *int
	LastReason    string
	Summary       string
	Undelivered   int
	Inbox         int
	Problem       string
	Warnings      []string
	Err           string
	RunningSince  *time.Time // while a session runs
	Paused        *time.Time
	PausedUntil   *time.Time
	RetryingSince *time.Time
	LastAlert     *chamber.AlertRecord // the latest alert, delivered or not (the alerts column)
}

// chamberID names a chamber in the dashboard's URLs: the ID of its units, from its path.
func chamberID(dir string) string { return timer.ID(dir) }

// newRow joins what ps and status say about a chamber: ps's state (armed, running, paused,
// retrying, complete, failed, cancelled, orphaned), status's details where there is one.
func newRow(r chamber.PsRow, st *chamber.StatusInfo, err error) chamberRow {
	c := chamberRow{ID: r.ID, Name: filepath.Base(r.Dir), Dir: r.Dir, State: r.State, Session: r.Session,
		Next: r.NextWake, LastExit: r.LastExit, Summary: r.Summary, Problem: r.Problem, RunningSince: r.Since}
	if filepath.IsAbs(r.Dir) {
		c.ID, c.Linked = chamberID(r.Dir), true
	}
	if err != nil {
		c.Err = errText(err)
	}
	if st == nil {
		return c
	}
	c.Session, c.NextReason, c.Undelivered, c.Inbox = st.Session, string(st.NextReason), st.Undelivered, st.Inbox
	c.Todos, c.Warnings = len(st.Todos), st.Warnings
	c.Paused, c.PausedUntil, c.RetryingSince = st.Paused, st.PausedUntil, st.RetryingSince
	c.LastAlert = st.LastAlert
	if c.State == "" || c.State == "missing" {
		c.State = st.State
	}
	if st.NextWake != nil {
		c.Next = st.NextWake
	}
	if st.Last != nil {
		e := st.Last.Exit
		c.LastExit, c.Summary, c.LastReason = &e, st.Last.Summary, st.Last.Reason
	}
	for _, u := range st.Upcoming {
		if u.Kind == "fallback" {
			at := u.At
			c.Fallback = &at
			break
		}
	}
	return c
}

func countStates(rows []chamberRow) map[string]int {
	m := map[string]int{}
	for _, r := range rows {
		m[r.State]++
	}
	return m
}

type chamberData struct {
	Row         chamberRow
	Status      *chamber.StatusInfo
	History     []chamber.HistoryRow // the latest maxHistory sessions, newest first
	HistoryErr  string
	Report      *validate.Report
	ReportErr   string
	Messages    []chamber.ReceivedMessage // the latest maxMessages, oldest first
	Earlier     int                       // older messages not shown
	MessagesErr string
	Block       blockData
	Docs        *chamber.Documents // plan.md and NOTES.md, read-only
	Spend       template.HTML      // the spend chart (spend.go); "" when nothing ran lately
	Diff        diffData           // what the session shown changed in the chamber (diff.go)
}

// maxMessages bounds the conversation on the page: a chamber of five years holds hundreds.
// The API (/api/chambers/ID/messages) and `cryochamber receive --all` have them all.
const maxMessages = 100

// maxHistory bounds the timeline on the page; /api/chambers/ID/history and `cryochamber
// history` have every session.
const maxHistory = 50

// conversation orders the messages oldest first, as a conversation reads (a reply after its
// question even in the same second: chamber.SortConversation).
func conversation(msgs []chamber.ReceivedMessage) []chamber.ReceivedMessage {
	out := append([]chamber.ReceivedMessage(nil), msgs...)
	chamber.SortConversation(out)
	return out
}

// blockData is one session's block on the page.
type blockData struct {
	Session, Latest int
	Prev, Next      int // 0: none
	Lines           []logLine
	Skipped         int
	Err             string
}

// logLine is one line of a block, numbered as marker errors number them (SESSION line = 1).
type logLine struct {
	N    int
	Kind string // header, end, out, err, note
	Text string
}

// classify splits a log line into its kind and its text (the prefix removed).
func classify(n int, l string) logLine {
	switch {
	case strings.HasPrefix(l, "--- CRYO SESSION "):
		return logLine{N: n, Kind: "header", Text: l}
	case strings.HasPrefix(l, "--- CRYO END "):
		return logLine{N: n, Kind: "end", Text: l}
	case strings.HasPrefix(l, "| ") || l == "|":
		return logLine{N: n, Kind: "out", Text: strings.TrimPrefix(strings.TrimPrefix(l, "|"), " ")}
	case strings.HasPrefix(l, "! ") || l == "!":
		return logLine{N: n, Kind: "err", Text: strings.TrimPrefix(strings.TrimPrefix(l, "!"), " ")}
	case strings.HasPrefix(l, "#"):
		return logLine{N: n, Kind: "note", Text: strings.TrimPrefix(strings.TrimPrefix(l, "#"), " ")}
	}
	return logLine{N: n, Kind: "note", Text: l}
}

// invisibleFormat reports the characters that change how the text around them is displayed
// without being seen: the bidirectional controls (an agent's "txt.exe" could be shown as
// "exe.txt", or a summary reordered) and the zero-width ones. html/template escapes markup,
// not these. The dashboard's own templates use none of them.
func invisibleFormat(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true // embeddings, overrides, isolates, marks
	case r >= 0x200b && r <= 0x200d, r == 0x2060, r == 0xfeff:
		return true // zero-width space, joiners, word joiner, BOM
	}
	return false
}

// neutralize replaces every invisible formatting character in a rendered page with U+FFFD,
// which shows that something was there.
func neutralize(page []byte) []byte {
	if !bytes.ContainsFunc(page, invisibleFormat) {
		return page
	}
	return bytes.Map(func(r rune) rune {
		if invisibleFormat(r) {
			return utf8.RuneError
		}
		return r
	}, page)
}

// errText is an error as the page shows it, with the chamber package's hint.
func errText(err error) string {
	var ce *chamber.Error
	if errors.As(err, &ce) && ce.Hint != "" {
		return err.Error() + " (hint: " + ce.Hint + ")"
	}
	return err.Error()
}
