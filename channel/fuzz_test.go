package channel

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzMailBody: whatever a mail holds, what reaches the inbox is valid UTF-8 without control
// characters (but tab and newline) or bidi overrides, and bounded.
func FuzzMailBody(f *testing.F) {
	for _, s := range []string{
		"Content-Type: text/plain\r\n\r\nhello\r\n",
		"Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>hi</p>\r\n--b--\r\n",
		"Content-Type: multipart/mixed; boundary=\"x\"\r\n\r\n--x\r\nContent-Type: multipart/mixed; boundary=\"x\"\r\n\r\n--x\r\n",
		"Content-Type: text/plain; charset=iso-2022-jp\r\nContent-Transfer-Encoding: base64\r\n\r\nGyRCJEMbKEI=\r\n",
		"Content-Type: text/html\r\n\r\n<div class=\"gmail_quote\"><blockquote><blockquote>x",
		"yes\r\n\r\nOn Mon, a wrote:\r\n> q\r\n",
		"\x00\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := mailBody(raw)
		if !utf8.ValidString(out) {
			t.Fatalf("not valid UTF-8: %q", out)
		}
		for _, r := range out {
			if (unicode.IsControl(r) && r != '\n' && r != '\t') || isBidi(r) {
				t.Fatalf("control or bidi character %U in %q", r, out)
			}
		}
		if len(out) > MaxBody+200 {
			t.Fatalf("%d bytes, more than the bound", len(out))
		}
		if q := stripQuoted(string(raw)); len(q) > len(strings.ReplaceAll(string(raw), "\r\n", "\n")) {
			t.Fatalf("stripQuoted grew the text")
		}
	})
}
