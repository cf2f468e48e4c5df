// Package sessionlog writes and reads cryo.log, the append-only log of a chamber's sessions.
//
// Every line of the log is one of the forms of docs/DESIGN.md:
//
//	--- CRYO SESSION 12 2026-11-22T10:00:03Z ---
//	# task: Follow up on PR #41
//	| what the agent printed on standard output
//	! what the agent printed on standard error
//	--- CRYO END 12 2026-11-22T10:04:51Z exit=0 ---
//
// Agent output is always written behind a "| " or "! " prefix, one log line per line the agent
// printed, so nothing an agent prints can begin a line with "---": no agent can forge or split a
// block, even by printing old blocks of the log. The text behind the prefix is the agent's bytes
// as printed (short whole lines: the fast path) or sanitized (long or split lines); every reader
// of this package sanitizes it (Line.Text, Copy), so a caller never sees it raw.
//
// Readers never read the whole file: the latest block is found by reading backwards from the end
// in 64 KiB chunks, a given session by a binary search over byte offsets, and no call holds more
// than about 2 MiB in memory whatever the size of the log or of a block.
//
// A crash can leave the last line of the file without its newline (a torn line, possibly cut in
// the middle of a UTF-8 character). A torn line is never a block boundary. The next writer
// completes it with a newline followed by the fixed line TornNote, which marks the line above as
// torn, so that readers still accept it later.
//
// The package never interprets markers, never reads the clock or the environment (callers pass
// `now`), and never rewrites or truncates the log: it only appends, or renames a corrupt log aside.
package sessionlog

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// MaxText is the longest text of one line after its two-byte prefix. Longer agent lines are cut
// into pieces of at most MaxText bytes, each its own line.
const MaxText = 1 << 20

const (
	// maxLine is the longest line a reader accepts, without its newline.
	maxLine = MaxText + 2
	// chunkSize is the unit of backward reads and of forward buffering.
	chunkSize = 64 << 10
	// timeLayout is RFC 3339 in UTC with whole seconds, the only time form of the log.
	timeLayout = "2006-01-02T15:04:05Z"

	sessionPrefix = "--- CRYO SESSION "
	endPrefix     = "--- CRYO END "
	boundarySuf   = " ---"
)

// TornNote is the text of the "# " line a writer appends after completing a torn last line with
// a newline. The line above it is read as torn: it may hold an incomplete UTF-8 sequence at its
// end, be a prefix of any line form, and is never a block boundary. Notes whose text equals
// TornNote are written with a "(note) " prefix so that no caller can mark a line as torn.
const TornNote = "cryochamber: the line above is incomplete (cut short by a crash)"

var tornLine = []byte("# " + TornNote)

// Kind is the form of one log line.
type Kind uint8

const (
	// Header is the SESSION line that opens a block.
	Header Kind = iota + 1
	// Meta is a "# " line written by cryochamber (task, command, events, notes).
	Meta
	// Stdout is a "| " line: what the agent printed on standard output.
	Stdout
	// Stderr is a "! " line: what the agent printed on standard error.
	Stderr
	// End is the END line that closes a block.
	End
	// Torn is a line cut short by a crash: the last line of a file that does not end with a
	// newline, or a line followed by the TornNote line. Its Text is the whole line, sanitized.
	// Markers must not be read from it.
	Torn
)

func (k Kind) String() string {
	switch k {
	case Header:
		return "header"
	case Meta:
		return "meta"
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case End:
		return "end"
	case Torn:
		return "torn"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ErrCorrupt is wrapped by every *CorruptError.
var ErrCorrupt = errors.New("corrupt session log")

// CorruptError says where and why the region of the log that was read is corrupt. The caller
// moves such a log aside (MoveAside) and starts a fresh one.
type CorruptError struct {
	Offset int64  // byte offset of the offending line
	Reason string // what is wrong with it
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt session log at byte %d: %s", e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corrupt(off int64, format string, args ...any) *CorruptError {
	return &CorruptError{Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// EndInfo is what an END line records.
type EndInfo struct {
	End    time.Time
	Exit   int    // 0, 1 or 2
	Reason string // "" or a word such as no-exit, crashed, timeout, agent-failed (then Exit is 2)
}

// line is one parsed, complete, non-torn line.
type line struct {
	kind Kind
	n    int       // Header, End: session number
	t    time.Time // Header, End
	exit int       // End
	why  string    // End: reason
	text []byte    // Meta, Stdout, Stderr: the text after the prefix
}

// parseLine classifies a complete line that is not torn. It returns a reason when the line is
// none of the forms; the reason quotes the line, shortened.
func parseLine(b []byte) (line, string) {
	if len(b) > 1 && (b[0] == '|' || b[0] == '!') && b[1] == ' ' {
		// The agent's text as it printed it (wholeLine): any bytes but a newline. Readers
		// sanitize it (Line.Text, Copy).
		l := line{kind: Stdout, text: b[2:]}
		if b[0] == '!' {
			l.kind = Stderr
		}
		return l, ""
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return line{}, "NUL byte in line " + quote(b)
	}
	if !utf8.Valid(b) {
		return line{}, "invalid UTF-8 in line " + quote(b)
	}
	if len(b) == 0 {
		return line{}, "empty line (every line starts with \"--- CRYO \", \"| \", \"! \" or \"# \")"
	}
	switch b[0] {
	case '|', '!', '#':
		// A bare "|" is accepted as an empty line: an editor that strips trailing blanks must not
		// make the whole log corrupt.
		if len(b) > 1 && b[1] != ' ' {
			break
		}
		l := line{kind: Meta}
		switch b[0] {
		case '|':
			l.kind = Stdout
		case '!':
			l.kind = Stderr
		}
		if len(b) > 1 {
			l.text = b[2:]
		}
		return l, ""
	case '-':
		s := string(b)
		switch {
		case strings.HasPrefix(s, sessionPrefix):
			n, t, why := parseSession(s)
			if why != "" {
				return line{}, "malformed SESSION line " + quote(b) + ": " + why
			}
			return line{kind: Header, n: n, t: t}, ""
		case strings.HasPrefix(s, endPrefix):
			n, e, why := parseEnd(s)
			if why != "" {
				return line{}, "malformed END line " + quote(b) + ": " + why
			}
			return line{kind: End, n: n, t: e.End, exit: e.Exit, why: e.Reason}, ""
		}
	}
	return line{}, "line " + quote(b) + " is not a SESSION, END, \"| \", \"! \" or \"# \" line"
}

// checkTorn checks a torn line: no NUL, valid UTF-8 except an incomplete sequence at its very
// end, and a prefix of some line form (the rest may be missing).
func checkTorn(b []byte) string {
	if len(b) > 1 && (b[0] == '|' || b[0] == '!') && b[1] == ' ' {
		return "" // agent text, raw (parseLine)
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return "NUL byte in torn line " + quote(b)
	}
	if !utf8.Valid(b[:len(b)-incomplete(b)]) {
		return "invalid UTF-8 in torn line " + quote(b)
	}
	if len(b) == 0 {
		return ""
	}
	switch b[0] {
	case '|', '!', '#':
		if len(b) == 1 || b[1] == ' ' {
			return ""
		}
	case '-':
		for _, p := range []string{sessionPrefix, endPrefix} {
			if bytes.HasPrefix(b, []byte(p)) || bytes.HasPrefix([]byte(p), b) {
				return ""
			}
		}
	}
	return "torn line " + quote(b) + " is not the start of any line form"
}

// incomplete is the number of bytes at the end of b that begin a UTF-8 sequence the end of b
// cuts short (0 to 3).
func incomplete(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return len(b) - i
			}
			return 0
		}
	}
	return 0
}

// parseSession parses "--- CRYO SESSION <n> <time> ---".
func parseSession(s string) (int, time.Time, string) {
	rest, ok := strings.CutSuffix(s[len(sessionPrefix):], boundarySuf)
	if !ok {
		return 0, time.Time{}, "it does not end with \" ---\""
	}
	f := strings.Split(rest, " ")
	if len(f) != 2 {
		return 0, time.Time{}, "want \"--- CRYO SESSION <n> <time> ---\""
	}
	n, why := parseNumber(f[0])
	if why != "" {
		return 0, time.Time{}, why
	}
	t, why := parseTime(f[1])
	if why != "" {
		return 0, time.Time{}, why
	}
	return n, t, ""
}

// parseEnd parses "--- CRYO END <n> <time> exit=<0|1|2>[ reason=<word>] ---".
func parseEnd(s string) (int, EndInfo, string) {
	var e EndInfo
	rest, ok := strings.CutSuffix(s[len(endPrefix):], boundarySuf)
	if !ok {
		return 0, e, "it does not end with \" ---\""
	}
	f := strings.Split(rest, " ")
	if len(f) != 3 && len(f) != 4 {
		return 0, e, "want \"--- CRYO END <n> <time> exit=<0|1|2>[ reason=<word>] ---\""
	}
	n, why := parseNumber(f[0])
	if why != "" {
		return 0, e, why
	}
	if e.End, why = parseTime(f[1]); why != "" {
		return 0, e, why
	}
	switch f[2] {
	case "exit=0", "exit=1", "exit=2":
		e.Exit = int(f[2][5] - '0')
	default:
		return 0, e, fmt.Sprintf("%q is not exit=0, exit=1 or exit=2", f[2])
	}
	if len(f) == 4 {
		r, ok := strings.CutPrefix(f[3], "reason=")
		if !ok || !isWord(r) {
			return 0, e, fmt.Sprintf("%q is not reason=<word>", f[3])
		}
		if e.Exit != 2 {
			return 0, e, fmt.Sprintf("a reason goes with exit=2, not exit=%d", e.Exit)
		}
		e.Reason = r
	}
	return n, e, ""
}

// parseNumber accepts a session number: decimal digits, no sign, no leading zero, at least 1.
func parseNumber(s string) (int, string) {
	if s == "" || len(s) > 18 || s[0] == '0' {
		return 0, fmt.Sprintf("session number %q is not a positive decimal without leading zeros", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Sprintf("session number %q is not a positive decimal without leading zeros", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("session number %q: %v", s, err)
	}
	return int(n), ""
}

// parseTime accepts exactly the form formatTime writes.
func parseTime(s string) (time.Time, string) {
	t, err := time.Parse(timeLayout, s)
	if err != nil || t.Format(timeLayout) != s {
		return time.Time{}, fmt.Sprintf("time %q is not RFC 3339 UTC with whole seconds (like 2026-11-22T10:00:03Z)", s)
	}
	return t, ""
}

// formatTime writes t in UTC, truncated to the second.
func formatTime(t time.Time) (string, error) {
	u := t.UTC().Truncate(time.Second)
	if u.Year() < 1 || u.Year() > 9999 {
		return "", fmt.Errorf("time %v is outside the years 1 to 9999", t)
	}
	return u.Format(timeLayout), nil
}

// isWord: a reason word, [a-z][a-z0-9-]*, at most 32 bytes.
func isWord(s string) bool {
	if s == "" || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func sessionLine(n int, start time.Time) (string, error) {
	if n < 1 {
		return "", fmt.Errorf("session number %d: must be at least 1", n)
	}
	ts, err := formatTime(start)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s%d %s%s", sessionPrefix, n, ts, boundarySuf), nil
}

func endLine(n int, end time.Time, exit int, reason string) (string, error) {
	if exit < 0 || exit > 2 {
		return "", fmt.Errorf("exit code %d: must be 0, 1 or 2", exit)
	}
	ts, err := formatTime(end)
	if err != nil {
		return "", err
	}
	if reason == "" {
		return fmt.Sprintf("%s%d %s exit=%d%s", endPrefix, n, ts, exit, boundarySuf), nil
	}
	if !isWord(reason) {
		return "", fmt.Errorf("reason %q: must be a word of [a-z0-9-], starting with a letter", reason)
	}
	if exit != 2 {
		return "", fmt.Errorf("reason %q given with exit code %d: a reason goes with exit code 2", reason, exit)
	}
	return fmt.Sprintf("%s%d %s exit=%d reason=%s%s", endPrefix, n, ts, exit, reason, boundarySuf), nil
}

// quote shows a line in an error message, shortened to about 60 bytes.
func quote(b []byte) string {
	const max = 60
	if len(b) <= max {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:max])) + "..."
}

// Sanitize returns s as the log records it: the terminal sanitizer of internal/termtext, for one
// line (a newline becomes U+FFFD: split lines first).
func Sanitize(s string) string { return termtext.Line(s) }

// sanitizeAppend is termtext.Append: the log and every command that prints agent text use the
// same sanitizer.
func sanitizeAppend(dst, src []byte, inRun bool) ([]byte, bool) {
	return termtext.Append(dst, src, inRun)
}

// runeCut returns the largest n <= max such that b[:n] ends on a rune boundary of b
// (len(b) > max >= utf8.UTFMax).
func runeCut(b []byte, max int) int {
	n := max
	for n > max-utf8.UTFMax && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}
