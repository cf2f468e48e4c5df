package fallback

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// Alert is what is delivered.
type Alert struct {
	Chamber string // absolute chamber path
	Session int
	Reason  string // failure, refused, timeout, crashed, no-exit, missed, overdue, ...
	Message string // the human text; may contain text that came from markers: untrusted
	Time    time.Time
	Host    string // the machine the chamber is on ("" when unknown)
}

// Bounds on the text of an alert. A chamber name or a reason longer than a line of a mail
// client helps nobody, and a message is a note to a human, not a log dump: the log is in the
// chamber.
const (
	maxNameRunes    = 64
	maxPathRunes    = 1024
	maxReasonRunes  = 64
	maxMessageBytes = 64 << 10
	maxTextRunes    = 2000 // Slack shows about 4000 characters of a message before folding it
)

const truncatedMark = " [truncated]"

// sanitizeBody keeps line breaks (normalised to \n) and tabs, replaces other control
// characters with a space and invalid UTF-8 with U+FFFD, and cuts the text at maxBytes on a
// rune boundary, saying so.
func sanitizeBody(s string, maxBytes int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	cut := false
	if len(s) > maxBytes {
		i := maxBytes
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
		cut = true
	}
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return ' '
		}
		return r
	}, s)
	if cut {
		s += truncatedMark
	}
	return s
}

// chamberName is the last element of the chamber path: what a person calls the chamber.
func chamberName(a Alert) string {
	name := termtext.OneLine(filepath.Base(a.Chamber), maxNameRunes)
	if name == "" || name == "." || name == "/" {
		return "chamber"
	}
	return name
}

func reasonText(a Alert) string {
	r := termtext.OneLine(a.Reason, maxReasonRunes)
	if r == "" {
		return "alert"
	}
	return r
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Subject is the email subject of an alert:
// "cryochamber: <chamber base name>: <reason> (session N)".
func Subject(a Alert) string {
	return fmt.Sprintf("cryochamber: %s: %s (session %d)", chamberName(a), reasonText(a), a.Session)
}

// Body is the plain-text email body: the message, then the facts a person needs to find the
// chamber and the session in its log.
func Body(a Alert) string {
	var b strings.Builder
	msg := strings.TrimRight(sanitizeBody(a.Message, maxMessageBytes), " \t\n")
	if msg != "" {
		b.WriteString(msg)
		b.WriteString("\n\n")
	}
	b.WriteString("Chamber: " + termtext.OneLine(a.Chamber, maxPathRunes) + "\n")
	if a.Host != "" {
		b.WriteString("Host:    " + termtext.OneLine(a.Host, maxNameRunes) + "\n")
	}
	b.WriteString("Session: " + strconv.Itoa(a.Session) + "\n")
	b.WriteString("Reason:  " + termtext.OneLine(a.Reason, maxReasonRunes) + "\n")
	b.WriteString("Time:    " + timeText(a.Time) + "\n")
	b.WriteString("\nSee `cryochamber status` and `cryochamber log --session " +
		strconv.Itoa(a.Session) + "` in the chamber.\n")
	return b.String()
}

// slackEscaper escapes the three characters Slack's mrkdwn gives meaning to. Without it an
// alert could write <!channel> to page everyone or <https://evil|docs> to disguise a link.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Text is the one-paragraph human summary sent in the webhook's "text" field.
func Text(a Alert) string {
	msg := termtext.OneLine(a.Message, maxTextRunes) // one line, bounded
	var b strings.Builder
	fmt.Fprintf(&b, "cryochamber: %s: %s (session %d) at %s.", chamberName(a), reasonText(a),
		a.Session, timeText(a.Time))
	if msg != "" {
		b.WriteString(" " + msg)
	}
	b.WriteString(" Chamber: " + termtext.OneLine(a.Chamber, maxPathRunes))
	if a.Host != "" {
		b.WriteString(" on " + termtext.OneLine(a.Host, maxNameRunes))
	}
	return slackEscaper.Replace(b.String())
}
