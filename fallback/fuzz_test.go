package fallback

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// FuzzSanitizeHeader: whatever an agent prints, a header piece comes out as one bounded line
// of valid UTF-8 without control, separator or format characters, and the subject, body and
// webhook text built from it keep their promises.
func FuzzSanitizeHeader(f *testing.F) {
	for _, s := range []string{"timeout", "failure\r\nBcc: evil@x", "a\u2028b\u202Ec", "\xff\xfe", "  \t ", "Überfällig ✓"} {
		f.Add(s, 64)
	}
	f.Fuzz(func(t *testing.T, s string, maxRunes int) {
		maxRunes %= 300
		got := termtext.OneLine(s, maxRunes)
		if !utf8.ValidString(got) {
			t.Fatalf("termtext.OneLine(%q) = %q: invalid UTF-8", s, got)
		}
		if strings.ContainsFunc(got, termtext.UnsafeInLine) || strings.ContainsAny(got, "\r\n\t") {
			t.Fatalf("termtext.OneLine(%q) = %q: holds an unsafe rune", s, got)
		}
		if got != strings.TrimSpace(got) || strings.Contains(got, "  ") {
			t.Fatalf("termtext.OneLine(%q) = %q: spaces not collapsed", s, got)
		}
		if n := utf8.RuneCountInString(got); maxRunes > 0 && n > maxRunes {
			t.Fatalf("termtext.OneLine(%q, %d) = %q: %d runes", s, maxRunes, got, n)
		}
		if again := termtext.OneLine(got, maxRunes); again != got {
			t.Fatalf("not idempotent: %q then %q", got, again)
		}
		a := Alert{Chamber: "/c/" + s, Session: maxRunes, Reason: s, Message: s, Time: time.Unix(0, 0)}
		if subj := Subject(a); strings.ContainsFunc(subj, termtext.UnsafeInLine) || !utf8.ValidString(subj) {
			t.Fatalf("Subject(%q) = %q", s, subj)
		}
		checkTexts(t, a)
	})
}
