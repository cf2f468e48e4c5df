package channel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Bounds on what a remote message may bring into the inbox. A person's message is a note, not a
// file transfer: the agent reads it in its prompt.
const (
	MaxBody    = 64 << 10 // body of one inbox message, after quotes are stripped
	maxFrom    = 200      // runes of the From line
	maxSubject = 200      // runes of the Subject line
)

// cleanText makes untrusted text safe to store and to show: valid UTF-8, \n line ends, no control
// characters but tab and newline, no bidi overrides (which make text read differently from
// what it says), at most max bytes (cut on a rune boundary, saying how much was left out).
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case unicode.IsControl(r), isBidi(r):
			return -1
		}
		return r
	}, s)
	if len(s) > max {
		cut := len(s)
		i := max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + fmt.Sprintf("\n[cut by cryochamber: %d more bytes]\n", cut-i)
	}
	return s
}

// isBidi reports the explicit directional formatting characters (LRE, RLE, PDF, LRO, RLO,
// LRI, RLI, FSI, PDI).
func isBidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// Ref is the short reference of one published item: derived from the chamber and the item, so
// that a run killed after publishing can find what it published (the marker in a GitHub
// comment, a Zulip message, the Message-ID of a mail).
func Ref(chamberID, itemID string) string {
	sum := sha256.Sum256([]byte(chamberID + "\x00" + itemID))
	return hex.EncodeToString(sum[:8])
}

// inboxID is the deterministic name of the inbox message for one remote message: its time (so
// the inbox sorts as usual), the channel, and a hash of the remote identity. The same remote
// message always gets the same name, so a sync killed after writing it and before recording it
// finds it there (in the inbox or, once a session claimed it, in the archive) instead of
// writing it twice.
func inboxID(channel, key string, at string) string {
	sum := sha256.Sum256([]byte(channel + "\x00" + key))
	return at + "-" + channel + "-" + hex.EncodeToString(sum[:8])
}

var (
	// An attribution line before a quoted reply, as mail clients write it ("On Mon, 23 Nov
	// 2026 at 10:00, cryochamber <c@example.com> wrote:"), in the languages seen most often.
	attributionRE = lazyRegexp(`(?i)^(on|am|le|el|il|op|em)\b.{0,300}\b(wrote|schrieb|a écrit|escribió|ha scritto|schreef|escreveu)\b.{0,200}:\s*$`)
	// Separators some clients put above the forwarded or quoted original.
	originalRE = lazyRegexp(`(?i)^\s*(-{2,}\s*(original message|ursprüngliche nachricht|message d'origine|mensaje original)\s*-{2,}|_{20,}|-{20,})\s*$`)
	// Outlook's quoted header block: "From: ..." followed within a few lines by "Sent:".
	outlookFromRE = lazyRegexp(`(?i)^\*?(from|von|de)\s*:\*?\s`)
	outlookSentRE = lazyRegexp(`(?i)^\*?(sent|gesendet|envoyé|date|enviado)\s*:\*?\s`)
)

// stripQuoted removes the history a mail client appends to a reply: everything from a
// "-----Original Message-----" or Outlook header block on, the trailing block of quoted (">")
// lines with the attribution line above it, and the signature after a "-- " line. Quoted lines
// the writer interleaved with their own answers are kept: they are what the answer refers to.
func stripQuoted(text string) string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	end := len(lines)
	for i, l := range lines {
		if originalRE().MatchString(l) {
			end = i
			break
		}
		if outlookFromRE().MatchString(l) {
			found := false
			for j := i + 1; j < len(lines) && j <= i+4; j++ {
				if outlookSentRE().MatchString(lines[j]) {
					found = true
					break
				}
			}
			if found {
				end = i
				break
			}
		}
	}
	lines = lines[:end]
	// The signature: from the last "-- " line on (RFC 3676 4.3).
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i] == "-- " || lines[i] == "--" {
			lines = lines[:i]
			break
		}
	}
	// The trailing quoted block, blank lines included.
	end = len(lines)
	for end > 0 {
		t := strings.TrimSpace(lines[end-1])
		if t == "" || strings.HasPrefix(t, ">") {
			end--
			continue
		}
		break
	}
	quoted := false
	for _, l := range lines[end:] {
		if strings.HasPrefix(strings.TrimSpace(l), ">") {
			quoted = true
		}
	}
	if quoted {
		lines = lines[:end]
		// The attribution, possibly wrapped over two lines by the client.
		if n := len(lines); n > 0 && attributionRE().MatchString(strings.TrimSpace(lines[n-1])) {
			lines = lines[:n-1]
		} else if n > 1 && attributionRE().MatchString(strings.TrimSpace(lines[n-2])+" "+strings.TrimSpace(lines[n-1])) {
			lines = lines[:n-2]
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// wordJoiner is U+2060: invisible, and it keeps "@" from starting a mention.
const wordJoiner = "\u2060"

var (
	githubMentionRE = lazyRegexp(`@([A-Za-z0-9])`)
	zulipMentionRE  = lazyRegexp(`@(_?\*|_?\{)`)
)

// neutralizeGitHub keeps text published on GitHub from notifying anyone: the agent reads
// untrusted text, and a prompt injection must not be able to page people through @mentions or
// a team mention. The text reads the same.
func neutralizeGitHub(s string) string {
	return githubMentionRE().ReplaceAllString(s, "@"+wordJoiner+"$1")
}

// neutralizeZulip does the same for Zulip's @**name**, @_**name** (silent), @**all** and user
// group (@*group*, @_*group*) forms.
func neutralizeZulip(s string) string {
	return zulipMentionRE().ReplaceAllString(s, "@"+wordJoiner+"$1")
}

// cutBytes cuts s to at most max bytes on a rune boundary, with a note that says where the
// whole text is.
func cutBytes(s string, max int, note string) string {
	if len(s) <= max {
		return s
	}
	max -= len(note)
	if max < 0 {
		max = 0
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max] + note
}

// lazyRegexp compiles expr on first use: every cryochamber command links this package, and
// compiling these at start cost each one (a wake, status) most of a millisecond.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
