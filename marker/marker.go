// Package marker reads the [CRYO:...] markers an agent prints to tell cryochamber what to do
// next (SPEC section 3): the grammar of each marker, WAKE and TODO times, and the shell-style
// word splitting of CMD.
//
// Lines are fed one at a time as the agent produces them, and the parser keeps only what the
// markers say (the latest EXIT, WAKE and CMD, bounded lists of the rest), so memory does not grow
// with the length of the output. The text is untrusted: the agent may have read anything. This
// package never executes anything, never reads files, the clock or the environment; the caller
// passes the chamber's time zone in and resolves relative times against the session's end.
package marker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on untrusted input. Going over one is an error that refuses hibernation, never a crash.
const (
	MaxLine      = 1 << 20  // bytes in one line read by Parse
	MaxMarker    = 64 << 10 // bytes in one marker, from "[CRYO:" to "]" (and in an EXIT summary)
	MaxPlans     = 100
	MaxFallbacks = 16 // distinct ones: identical FALLBACKs count once
	MaxReplies   = 64
	MaxTodos     = 100
)

// Result is what the markers of one session block say.
type Result struct {
	Exit      *Exit      // the last EXIT, if valid; nil if there is none or the last is invalid
	Wake      *Wake      // the last WAKE, if valid; nil (with no errors) means the plan is complete
	Cmd       *Cmd       // the last CMD, if valid; nil means the previous command
	Plans     []Plan     // every PLAN, in order
	Fallbacks []Fallback // every distinct FALLBACK, in order of first appearance
	Replies   []Reply
	Todos     []Todo
	TodosDone []TodoDone // [CRYO:TODO-DONE <id>], in order
	// Usage is the last valid USAGE marker: what the agent says the session used (its claim;
	// usage.go). nil when there is none.
	Usage *Usage
	// Errors are the problems that must refuse hibernation. They and Warnings are sorted by line.
	Errors []*ParseError
	// Warnings are reported but do not refuse: unknown keywords, and invalid EXIT, WAKE or CMD
	// markers that a later valid marker of the same keyword supersedes (agents echo old text).
	Warnings []*ParseError
}

// Exit is [CRYO:EXIT <code>] <summary>.
type Exit struct {
	Code    int    // 0 success, 1 partial, 2 failure
	Summary string // the text after the marker up to the next marker on the line, trimmed
	Line    int
}

// Wake is [CRYO:WAKE <time>].
type Wake struct {
	Time Time
	Line int
}

// Cmd is [CRYO:CMD <command line>].
type Cmd struct {
	Raw  string   // the command line as written, trimmed
	Args []string // Raw split by SplitCommand; at least one word, the first not empty
	Line int
}

// Plan is [CRYO:PLAN <note>].
type Plan struct {
	Text string
	Line int
}

// Fallback is [CRYO:FALLBACK <action> <target> "<message>"].
type Fallback struct {
	Action  string // "email" or "webhook"
	Target  string // an e-mail address, or an http(s) URL
	Message string
	Line    int
}

// Reply is [CRYO:REPLY "<text>"].
type Reply struct {
	Text string
	Line int
}

// Todo is [CRYO:TODO <time> "<text>"].
type Todo struct {
	Time Time
	Text string
	Line int
}

// TodoDone is [CRYO:TODO-DONE <id>]: the pending TODO with that ID is done.
type TodoDone struct {
	ID   string
	Line int
}

// The keywords whose last marker wins.
const (
	kExit = iota
	kWake
	kCmd
	nLast
)

var lastNames = [nLast]string{"EXIT", "WAKE", "CMD"}

// Parser accumulates the markers of lines fed to it one at a time. The zero value is not
// usable; call NewParser.
type Parser struct {
	loc *time.Location

	exit *Exit
	wake *Wake
	cmd  *Cmd
	// last tracks the errors of the EXIT, WAKE and CMD markers, which depend on what follows.
	last [nLast]lastKeyword

	plans     []Plan
	fallbacks []Fallback
	seenFB    map[Fallback]bool // keys have Line 0
	replies   []Reply
	todos     []Todo
	todosDone []TodoDone
	usage     *Usage
	over      map[string]bool // keywords whose count limit has been reported

	errs, warns capped
	seq         int // counts problems, to keep those of one line in the order they were found
}

func (p *Parser) stamp(e *ParseError) *ParseError {
	p.seq++
	e.seq = p.seq
	return e
}

func (p *Parser) err(e *ParseError)  { p.errs.add(p.stamp(e)) }
func (p *Parser) warn(e *ParseError) { p.warns.add(p.stamp(e)) }

// NewParser returns a parser that reads absolute times without an offset in loc, the chamber's
// time zone (nil means UTC).
func NewParser(loc *time.Location) *Parser {
	if loc == nil {
		loc = time.UTC
	}
	return &Parser{loc: loc}
}

// Parse reads every line of r, numbering lines from 1. A line longer than MaxLine is skipped and
// reported in Result.Errors. The error is only for a failure to read r; the Result then holds
// what was read before it.
func Parse(r io.Reader, loc *time.Location) (*Result, error) {
	p := NewParser(loc)
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for n := 1; ; n++ {
		buf = buf[:0]
		long, eof := false, false
		for {
			chunk, err := br.ReadSlice('\n')
			if !long {
				// Room for the line, "\r\n", and nothing more: never hold a long line in memory.
				if len(buf)+len(chunk) > MaxLine+2 {
					long, buf = true, buf[:0]
				} else {
					buf = append(buf, chunk...)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				eof = true
				break
			}
			if err != nil {
				return p.Result(), fmt.Errorf("read line %d: %w", n, err)
			}
			break
		}
		line := bytes.TrimSuffix(buf, []byte("\n")) // Line itself drops a "\r" before it
		switch {
		case long || len(bytes.TrimSuffix(line, []byte("\r"))) > MaxLine:
			p.err(&ParseError{Line: n, Msg: "line is longer than 1 MiB; its markers were not read"})
		case eof && len(buf) == 0:
			// The input ended with a newline (or was empty): there is no further line.
		case bytes.IndexByte(line, '[') >= 0: // most lines hold no marker: spare the copy
			p.Line(n, string(line))
		}
		if eof {
			return p.Result(), nil
		}
	}
}

// Line reads the markers of one line of output. n is the number that errors report for it. A
// trailing "\n" or "\r\n" is ignored.
func (p *Parser) Line(n int, s string) {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
	for i := 0; i < len(s); {
		j := indexMarker(s[i:])
		if j < 0 {
			return
		}
		i = p.marker(n, s, i+j)
	}
}

// indexMarker returns the index of the first "[CRYO:" in s, in any letter case, or -1.
func indexMarker(s string) int {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '[')
		if j < 0 {
			return -1
		}
		i += j
		if len(s)-i < 6 {
			return -1
		}
		if s[i+1]|0x20 == 'c' && s[i+2]|0x20 == 'r' && s[i+3]|0x20 == 'y' && s[i+4]|0x20 == 'o' && s[i+5] == ':' {
			return i
		}
		i++
	}
}

// How each keyword's closing bracket is found.
type closeMode int

const (
	closeFirst  closeMode = iota // the first ]
	closeNested                  // brackets nest; no quoting (an apostrophe is just text)
	closeShell                   // brackets nest; shell quotes and backslashes protect ]
	closeQuoted                  // double quotes (with \" and \\) protect ]
)

var keywords = map[string]closeMode{
	"EXIT":      closeFirst,
	"WAKE":      closeFirst,
	"CMD":       closeShell,
	"PLAN":      closeNested,
	"FALLBACK":  closeQuoted,
	"REPLY":     closeQuoted,
	"TODO":      closeQuoted,
	"TODO-DONE": closeFirst,
	"USAGE":     closeFirst,
}

// maxKeyword is the length of the longest keyword: a longer token is no keyword.
const maxKeyword = len("TODO-DONE")

// findClose returns the index of the ] that closes a marker whose text starts at s[i], or -1,
// and whether the line ended inside a quote.
func findClose(s string, i int, mode closeMode) (int, bool) {
	depth := 0
	var quote byte // 0, '\'' or '"'
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case quote == '"':
			switch {
			case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\' ||
				(mode == closeShell && (s[i+1] == '$' || s[i+1] == '`'))):
				i++
			case c == '"':
				quote = 0
			}
		case c == ']':
			if depth == 0 || mode == closeFirst || mode == closeQuoted {
				return i, false
			}
			depth--
		case c == '[' && (mode == closeNested || mode == closeShell):
			depth++
		case c == '"' && (mode == closeQuoted || mode == closeShell):
			quote = '"'
		case c == '\'' && mode == closeShell:
			quote = '\''
		case c == '\\' && mode == closeShell:
			i++ // outside quotes a backslash makes the next character literal
		}
	}
	return -1, quote != 0
}

// marker reads the marker that starts at s[start] ("[CRYO:") and returns where to go on
// scanning.
func (p *Parser) marker(n int, s string, start int) int {
	i := start + len("[CRYO:")
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	kwStart := i
	for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != ']' {
		i++
	}
	token := s[kwStart:i]
	kw := ""
	mode, known := closeFirst, false
	if len(token) <= maxKeyword {
		kw = strings.ToUpper(token)
		mode, known = keywords[kw]
	}
	if !known {
		kw = ""
	}

	end, inQuote := findClose(s, i, mode)
	if end < 0 {
		what := quote("[CRYO:" + token)
		if known {
			what = kw
		}
		msg := fmt.Sprintf("%s marker is not closed on this line (a marker must end with ] on the line it starts)", what)
		if inQuote {
			msg += "; a quote is not closed"
		}
		p.problem(kw, n, strings.TrimSpace(s[i:]), &ParseError{Line: n, Keyword: kw, Msg: msg})
		return len(s)
	}
	next := end + 1
	if !known {
		msg := "marker without a keyword ignored"
		if token != "" {
			msg = fmt.Sprintf("unknown marker keyword %s ignored (want EXIT, WAKE, CMD, PLAN, FALLBACK, REPLY, TODO, TODO-DONE or USAGE)", quote(token))
		}
		p.warn(&ParseError{Line: n, Msg: msg})
		return next
	}

	body := strings.Trim(s[i:end], " \t")
	if next-start > MaxMarker {
		p.problem(kw, n, body, &ParseError{Line: n, Keyword: kw, Msg: kw + " marker is longer than 64 KiB"})
		return next
	}
	if err := checkText(s[start:next]); err != nil {
		p.problem(kw, n, body, &ParseError{Line: n, Keyword: kw, Msg: kw + " marker: " + err.Error(), Err: err})
		return next
	}

	switch kw {
	case "EXIT":
		summary := s[next:]
		if j := indexMarker(summary); j >= 0 {
			summary = summary[:j]
		}
		p.exitMarker(n, body, strings.Trim(summary, " \t"))
	case "WAKE":
		t, err := ParseTime(body, p.loc)
		if err != nil {
			p.problem(kw, n, body, lineErr(n, kw, subject(kw, body)+": "+err.Error(), err))
			return next
		}
		p.wake = &Wake{Time: t, Line: n}
		p.valid(kWake, n)
	case "CMD":
		args, err := SplitCommand(body)
		switch {
		case err != nil:
			p.problem(kw, n, body, lineErr(n, kw, subject(kw, body)+": "+err.Error(), err))
		case len(args) == 0:
			p.problem(kw, n, body, lineErr(n, kw, "CMD: empty command (leave CMD out to keep the previous command)", nil))
		case args[0] == "":
			p.problem(kw, n, body, lineErr(n, kw, subject(kw, body)+": empty program name", nil))
		default:
			p.cmd = &Cmd{Raw: body, Args: args, Line: n}
			p.valid(kCmd, n)
		}
	case "PLAN":
		if body == "" {
			p.err(lineErr(n, kw, "PLAN: empty note", nil))
		} else if p.room(n, kw, len(p.plans), MaxPlans) {
			p.plans = append(p.plans, Plan{Text: body, Line: n})
		}
	case "FALLBACK":
		p.fallbackMarker(n, body)
	case "REPLY":
		text, err := quotedOnly(body)
		switch {
		case err != nil:
			p.err(lineErr(n, kw, subject(kw, body)+": "+err.Error(), nil))
		case text == "":
			p.err(lineErr(n, kw, "REPLY: empty text", nil))
		case p.room(n, kw, len(p.replies), MaxReplies):
			p.replies = append(p.replies, Reply{Text: text, Line: n})
		}
	case "TODO":
		p.todoMarker(n, body)
	case "TODO-DONE":
		switch {
		case !validTodoID(body):
			p.err(lineErr(n, kw, subject(kw, body)+": not a TODO ID (want [CRYO:TODO-DONE s3-1], an id from todo.json)", nil))
		case p.room(n, kw, len(p.todosDone), MaxTodos):
			p.todosDone = append(p.todosDone, TodoDone{ID: body, Line: n})
		}
	case "USAGE":
		p.usageMarker(n, body) // usage.go
	}
	return next
}

func lineErr(n int, kw, msg string, err error) *ParseError {
	return &ParseError{Line: n, Keyword: kw, Msg: msg, Err: err}
}

// problem records an error of a marker. For EXIT, WAKE and CMD it is held as pending: the
// marker no longer counts (an invalid last marker must never fall back to an earlier valid one),
// and whether it is an error or a warning depends on what follows.
func (p *Parser) problem(kw string, n int, body string, e *ParseError) {
	k := slices.Index(lastNames[:], kw)
	if k < 0 {
		p.err(e)
		return
	}
	switch k {
	case kExit:
		p.exit = nil
	case kWake:
		p.wake = nil
	case kCmd:
		p.cmd = nil
	}
	p.last[k].line = n
	p.last[k].pending.add(p.stamp(e), subject(kw, body))
}

// lastKeyword is the state of one keyword whose last marker wins.
type lastKeyword struct {
	line int // of the latest marker, valid or not: the one that counts
	// pending are the errors since the latest valid marker: errors unless a valid one follows.
	pending problems
	// superseded are the errors that a later valid marker overrides: warnings. Their message
	// names the marker that counts in the end, so it is written by Result.
	superseded problems
}

// problems is a capped list of marker errors with the subject (`WAKE "banana"`) of each.
type problems struct {
	errs     capped
	subjects []string
}

func (pr *problems) add(e *ParseError, subject string) {
	if len(pr.errs.list) < maxReported {
		pr.subjects = append(pr.subjects, subject)
	}
	pr.errs.add(e)
}

// valid records the valid marker of keyword k on line n: it supersedes the pending errors.
func (p *Parser) valid(k, n int) {
	lk := &p.last[k]
	lk.line = n
	for i, e := range lk.pending.errs.list {
		lk.superseded.add(e, lk.pending.subjects[i])
	}
	lk.superseded.errs.count(lk.pending.errs.dropped, lk.pending.errs.firstDropped)
	lk.pending = problems{}
}

// room reports whether another marker of kw fits under its limit, and reports the first one
// that does not.
func (p *Parser) room(n int, kw string, have, limit int) bool {
	if have < limit {
		return true
	}
	if !p.over[kw] {
		if p.over == nil {
			p.over = map[string]bool{}
		}
		p.over[kw] = true
		p.err(lineErr(n, kw, fmt.Sprintf("more than %d %s markers; this one and the rest are ignored", limit, kw), nil))
	}
	return false
}

func (p *Parser) exitMarker(n int, body, summary string) {
	code := -1
	switch body {
	case "0", "1", "2":
		code = int(body[0] - '0')
	}
	var msg string
	var err error
	switch {
	case body == "":
		msg = "EXIT: missing code (want 0 success, 1 partial or 2 failure)"
	case code < 0:
		msg = subject("EXIT", body) + ": code must be 0, 1 or 2"
	case len(summary) > MaxMarker:
		msg = "EXIT summary is longer than 64 KiB"
	default:
		if err = checkText(summary); err != nil {
			msg = "EXIT summary: " + err.Error()
		}
	}
	if msg != "" {
		p.problem("EXIT", n, body, lineErr(n, "EXIT", msg, err))
		return
	}
	p.exit = &Exit{Code: code, Summary: summary, Line: n}
	p.valid(kExit, n)
}

func (p *Parser) fallbackMarker(n int, body string) {
	fail := func(msg string, err error) { p.err(lineErr(n, "FALLBACK", msg, err)) }
	action, rest := cutBlank(body)
	target, rest := cutBlank(rest)
	switch strings.ToLower(action) {
	case "email", "webhook":
		action = strings.ToLower(action)
	case "":
		fail(`FALLBACK: missing action (want [CRYO:FALLBACK email|webhook <target> "<message>"])`, nil)
		return
	default:
		fail(fmt.Sprintf("unknown FALLBACK action %s (want email or webhook)", quote(action)), nil)
		return
	}
	if target == "" || target[0] == '"' {
		fail(fmt.Sprintf(`FALLBACK %s: missing target (want [CRYO:FALLBACK %s <target> "<message>"])`, action, action), nil)
		return
	}
	if err := checkTarget(action, target); err != nil {
		fail(fmt.Sprintf("FALLBACK %s target %s: %v", action, quote(target), err), err)
		return
	}
	msg, err := quotedOnly(rest)
	if err != nil {
		fail(fmt.Sprintf("FALLBACK %s %s message: %v", action, quote(target), err), err)
		return
	}
	key := Fallback{Action: action, Target: target, Message: msg}
	if p.seenFB[key] {
		return
	}
	if !p.room(n, "FALLBACK", len(p.fallbacks), MaxFallbacks) {
		return
	}
	if p.seenFB == nil {
		p.seenFB = map[Fallback]bool{}
	}
	p.seenFB[key] = true
	key.Line = n
	p.fallbacks = append(p.fallbacks, key)
}

// checkTarget accepts a single bare e-mail address, or an absolute http(s) URL with a host.
func checkTarget(action, target string) error {
	if action == "email" {
		a, err := mail.ParseAddress(target)
		if err != nil || a.Name != "" || a.Address != target {
			return errors.New("not a single e-mail address (want user@example.com, without a name or <>)")
		}
		return nil
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return errors.New("not an absolute http or https URL (want https://host/path)")
	}
	return nil
}

func (p *Parser) todoMarker(n int, body string) {
	q := strings.IndexByte(body, '"')
	if q < 0 {
		p.err(lineErr(n, "TODO", subject("TODO", body)+`: the text must be in double quotes (want [CRYO:TODO <time> "<text>"])`, nil))
		return
	}
	timeText := strings.Trim(body[:q], " \t")
	t, err := ParseTime(timeText, p.loc)
	if err != nil {
		p.err(lineErr(n, "TODO", subject("TODO", timeText)+": "+err.Error(), err))
		return
	}
	text, err := quotedOnly(body[q:])
	switch {
	case err != nil:
		p.err(lineErr(n, "TODO", subject("TODO", body)+": "+err.Error(), err))
	case text == "":
		p.err(lineErr(n, "TODO", subject("TODO", timeText)+": empty text", nil))
	case p.room(n, "TODO", len(p.todos), MaxTodos):
		p.todos = append(p.todos, Todo{Time: t, Text: text, Line: n})
	}
}

// cutBlank splits off the first blank-separated token of s.
func cutBlank(s string) (tok, rest string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// quotedOnly reads s (already trimmed) as exactly one double-quoted string in which \" is a
// quote and \\ a backslash; any other backslash is kept as it is.
func quotedOnly(s string) (string, error) {
	if s == "" || s[0] != '"' {
		return "", errors.New(`text must be in double quotes ("...", with \" for a quote)`)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			i++
			b.WriteByte(s[i])
		case c == '"':
			if strings.Trim(s[i+1:], " \t") != "" {
				return "", fmt.Errorf("unexpected text after the closing quote: %s", quote(s[i+1:]))
			}
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("double quote is not closed")
}

// checkText refuses invalid UTF-8 and control characters other than tab (including the Unicode
// line and paragraph separators): marker text ends up in e-mails, unit files and file names.
func checkText(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t') || c == 0x7f {
				return fmt.Errorf("control character %U (only tab is allowed)", rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return errors.New("invalid UTF-8")
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("control character %U (only tab is allowed)", r)
		}
		i += size
	}
	return nil
}

// Result returns what the lines fed so far say. It can be called again after more lines.
func (p *Parser) Result() *Result {
	r := &Result{
		Plans:     slices.Clone(p.plans),
		Fallbacks: slices.Clone(p.fallbacks),
		Replies:   slices.Clone(p.replies),
		Todos:     slices.Clone(p.todos),
		TodosDone: slices.Clone(p.todosDone),
	}
	if p.usage != nil {
		u := *p.usage
		r.Usage = &u
	}
	if p.exit != nil {
		e := *p.exit
		r.Exit = &e
	}
	if p.wake != nil {
		w := *p.wake
		r.Wake = &w
	}
	if p.cmd != nil {
		c := *p.cmd
		c.Args = slices.Clone(c.Args)
		r.Cmd = &c
	}
	r.Errors = p.errs.appendTo(nil, "errors")
	r.Warnings = p.warns.appendTo(nil, "warnings")
	for k, lk := range p.last {
		kw := lastNames[k]
		r.Errors = lk.pending.errs.appendTo(r.Errors, "invalid "+kw+" markers")
		for i, e := range lk.superseded.errs.list {
			r.Warnings = append(r.Warnings, &ParseError{
				Line:    e.Line,
				Keyword: kw,
				Msg:     fmt.Sprintf("%s ignored: the %s on line %d wins", lk.superseded.subjects[i], kw, lk.line),
				Err:     e,
				seq:     e.seq,
			})
		}
		if d := lk.superseded.errs; d.dropped > 0 {
			r.Warnings = append(r.Warnings, &ParseError{
				Line:    d.firstDropped,
				Keyword: kw,
				Msg:     fmt.Sprintf("%d more ignored %s markers from this line on are not shown", d.dropped, kw),
				seq:     math.MaxInt,
			})
		}
	}
	byLine := func(l []*ParseError) {
		sort.SliceStable(l, func(i, j int) bool {
			if l[i].Line != l[j].Line {
				return l[i].Line < l[j].Line
			}
			return l[i].seq < l[j].seq
		})
	}
	byLine(r.Errors)
	byLine(r.Warnings)
	return r
}

// validTodoID reports whether s can be a TODO's ID (s3-1, s3-1-a2): letters, digits and
// hyphens, at most 64 bytes, starting with a letter or digit.
func validTodoID(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
