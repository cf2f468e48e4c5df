package termtext

import (
	"strings"
	"unicode"
)

// OneLine returns untrusted text as one line that is safe in a mail header, a subject, a chat
// message's first line or a status line: invalid UTF-8 becomes U+FFFD, and every control
// character (CR and LF included), line or paragraph separator and format character (such as a
// bidi override) becomes a space. Leading and trailing spaces are trimmed and runs of spaces
// collapse to one, so "a\r\nBcc: x" reads "a Bcc: x". The result has at most maxRunes runes
// (no limit when maxRunes <= 0), and OneLine of it is itself.
func OneLine(s string, maxRunes int) string {
	var b strings.Builder
	n := 0
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if UnsafeInLine(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		// One rune is reserved for a pending space so the bound holds exactly.
		need := 1
		if space {
			need = 2
		}
		if maxRunes > 0 && n+need > maxRunes {
			break
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// UnsafeInLine reports the runes OneLine never lets through, besides spaces: controls (C0, DEL,
// C1), Unicode line and paragraph separators, and format characters, which include the bidi
// overrides that make a subject read differently from what it says.
func UnsafeInLine(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Cf)
}
