package agent

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"
)

//go:embed prompt.tmpl
var promptText string

// promptTmpl is parsed at the first prompt, not at every start of the program (issue 28: the
// parse was most of this package's share of `--version`).
var promptTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("prompt").Funcs(template.FuncMap{
		"oneline":  oneline,
		"quote":    quoteBody,
		"dur":      humanDuration,
		"exitword": exitWord,
		"join":     func(s []string) string { return oneline(strings.Join(s, ", ")) },
		// The chamber's zone is bound per call (see Prompt); these stand in for the parse.
		"at": func(time.Time) string { return "" }, "wake": func(time.Time) string { return "" },
		"now": func() string { return "" }, "utc": func() string { return "" },
		"zone": func() string { return "" }, "offset": func() string { return "" },
	}).Parse(promptText))
})

// MaxPromptBody is how much of one message's body the prompt quotes. The rest stays in the
// archived message file, which the prompt names.
const MaxPromptBody = 32 << 10

// PromptData is everything the session prompt says. Times are shown in Now's location, the
// chamber's zone: pass a named location (time.LoadLocation) so the prompt can name it.
type PromptData struct {
	Now     time.Time // shown with its offset and in UTC
	Session int
	// Absolute paths of the chamber, plan.md, NOTES.md and cryo.log.
	Dir, Plan, Notes, Log string
	Task                  string    // "" → read plan.md and NOTES.md and do the next step
	Command               string    // the command line that was run (for the agent's information)
	Agent                 string    // the name a CMD uses to run this agent again ("opencode"); "" → "<agent>"
	Allowed               []string  // programs a CMD may name (allowed_commands); nil: not listed
	FallbackTargets       []string  // targets (or patterns) a FALLBACK may name; nil: none
	Previous              *Previous // nil for the first session
	Delayed               *Delay    // a DELAYED WAKE notice at the very top
	Early                 *Early    // woken before the scheduled wake (by messages)
	Attempt               int       // > 0: this is retry k of a failed session
	Messages              []Message // inbox batch claimed by this session
	Todos                 []Todo    // due TODOs claimed by this session
	Pending               []Todo    // TODOs still pending (so the agent does not add them again)
	Warnings              []string  // e.g. "cryo.log was corrupt and was moved aside to ..."
	LateGrace             time.Duration
	Limits                []string // what the operator's limits (guardrails) did to the schedule
}

// Previous is the last finished session.
type Previous struct {
	Session int
	Exit    int
	Summary string
	Plans   []string
	End     time.Time
}

// Delay describes a wake that ran late (machine off or asleep).
type Delay struct {
	Due  time.Time
	Late time.Duration
}

// Early describes a wake before the scheduled one.
type Early struct {
	Scheduled time.Time
	By        string // what woke the session: "messages", "a TODO", "a request"
}

// Message is one claimed inbox message.
type Message struct {
	ID, From, Subject string
	Time              time.Time
	Body              string
}

// Todo is one TODO item.
type Todo struct {
	Text    string
	Due     time.Time
	Attempt int
}

// Prompt renders the session prompt. Text that comes from outside (messages, summaries, task,
// warnings) is made valid UTF-8 without control characters, and message bodies are quoted line
// by line, so none of it can pass for the prompt's own structure.
func Prompt(d PromptData) (string, error) {
	if d.Now.IsZero() {
		return "", errors.New("prompt: Now is not set")
	}
	if d.Session < 1 {
		return "", fmt.Errorf("prompt: session number %d (want 1 or more)", d.Session)
	}
	loc := d.Now.Location()
	t, err := promptTmpl().Clone()
	if err != nil {
		return "", fmt.Errorf("prompt: %w", err)
	}
	t.Funcs(template.FuncMap{
		"at":     func(x time.Time) string { return x.In(loc).Format("Mon 2006-01-02 15:04 -07:00") },
		"wake":   func(x time.Time) string { return x.In(loc).Format("2006-01-02T15:04:05Z07:00") },
		"now":    func() string { return d.Now.Format("Mon 2006-01-02 15:04:05 -07:00") },
		"utc":    func() string { return d.Now.UTC().Format("2006-01-02 15:04:05 UTC") },
		"zone":   func() string { return zoneName(d.Now) },
		"offset": func() string { return d.Now.Format("-07:00") },
	})
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("prompt: %w", err)
	}
	return b.String(), nil
}

// zoneName names t's zone: the IANA name when there is one, else its abbreviation.
func zoneName(t time.Time) string {
	if name := t.Location().String(); name != "" && name != "Local" {
		return name
	}
	abbr, _ := t.Zone()
	return abbr
}

func exitWord(code int) string {
	switch code {
	case 0:
		return "success"
	case 1:
		return "partial"
	case 2:
		return "failure"
	}
	return "unknown"
}

// clean makes s valid UTF-8 and replaces control characters (keeping newlines when asked).
func clean(s string, keepNewline bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' && keepNewline, r == '\t':
			return r
		case unicode.IsControl(r), r == '\u2028', r == '\u2029':
			return ' '
		}
		return r
	}, s)
}

// oneline is s on one line, trimmed.
func oneline(s string) string {
	return strings.TrimSpace(clean(s, false))
}

// quoteBody quotes a message body: every line is indented and starts with "> ". A body over
// MaxPromptBody is cut at a rune boundary, with a pointer to the archived message.
func quoteBody(id, body string) string {
	cut := 0
	if len(body) > MaxPromptBody {
		n := MaxPromptBody
		for n > 0 && !utf8.RuneStart(body[n]) {
			n--
		}
		cut = len(body) - n
		body = body[:n]
	}
	body = strings.ReplaceAll(body, "\r\n", "\n")
	body = strings.TrimRight(clean(body, true), " \t\n")
	if body == "" {
		body = "(empty)"
	}
	var b strings.Builder
	for i, line := range strings.Split(body, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight("    > "+line, " \t"))
	}
	if cut > 0 {
		fmt.Fprintf(&b, "\n    (%d more bytes not shown: the whole message %s is in messages/inbox/archive/)", cut, oneline(id))
	}
	return b.String()
}

// humanDuration is d rounded for a reader: "45s", "12m", "1h30m", "3d4h".
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	d = d.Round(time.Minute)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	m := (d - h*time.Hour) / time.Minute
	var b strings.Builder
	if days > 0 {
		fmt.Fprintf(&b, "%dd", days)
	}
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 && days == 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	return b.String()
}
