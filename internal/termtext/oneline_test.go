package termtext

import (
	"strings"
	"testing"
)

// TestOneLine: what reaches a header or a status line is one line, whatever was written.
func TestOneLine(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{name: "plain", in: "timeout", max: 64, want: "timeout"},
		{name: "CRLF injection", in: "failure\r\nBcc: evil@x", max: 64, want: "failure Bcc: evil@x"},
		{name: "lone LF and CR", in: "a\nb\rc", max: 64, want: "a b c"},
		{name: "tabs and runs of space", in: "  a \t\t b  ", max: 64, want: "a b"},
		{name: "NUL, ESC, DEL, C1", in: "a\x00b\x1b[31mc\x7fd\u0085e", max: 64, want: "a b [31mc d e"},
		{name: "line and paragraph separators", in: "a\u2028Bcc: x\u2029y", max: 64, want: "a Bcc: x y"},
		{name: "bidi override", in: "exe.\u202Etxt", max: 64, want: "exe. txt"},
		{name: "zero-width joiner is a format char", in: "a\u200db", max: 64, want: "a b"},
		{name: "invalid UTF-8", in: "a\xffb", max: 64, want: "a\uFFFDb"},
		{name: "unicode kept", in: "Überfällig ✓", max: 64, want: "Überfällig ✓"},
		{name: "bounded in runes", in: "ééééé", max: 3, want: "ééé"},
		{name: "bound never ends on a space", in: "ab cd", max: 3, want: "ab"},
		{name: "no bound", in: strings.Repeat("x", 300), max: 0, want: strings.Repeat("x", 300)},
		{name: "only controls", in: "\r\n\t", max: 64, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OneLine(tt.in, tt.max); got != tt.want {
				t.Errorf("OneLine(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}
