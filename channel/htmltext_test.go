package channel

import (
	"strings"
	"testing"
)

// An HTML-only mail read as the browser would: what a tag's attribute, a comment, a script or a
// quoted history hold is not the sender's words.
func TestHTMLToTextParses(t *testing.T) {
	in := `<html><head><title>t</title><style>p{color:red}</style></head><body>` +
		`<p title="a>b">hello <b>there</b></p><!-- <p>a hidden comment</p> -->` +
		`<img alt="x>y" src="cid:1">line two<br>line three` +
		`<script>var s = "</p>not text";</script>` +
		`<blockquote>quoted <blockquote>deeper</blockquote> history</blockquote>` +
		`<p>fish &amp; chips &lt;3</p>` +
		`<div class="gmail_quote">On Mon, someone wrote: old text</div></body></html>`
	got := htmlToText(in)
	for _, want := range []string{"hello there", "line two\nline three", "fish & chips <3"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{`b">`, `y"`, "hidden comment", "not text", "var s", "quoted", "deeper", "history", "old text", "color:red", "<"} {
		if bad == "<" {
			if strings.Contains(strings.ReplaceAll(got, "<3", ""), "<") {
				t.Errorf("a tag is left:\n%s", got)
			}
			continue
		}
		if strings.Contains(got, bad) {
			t.Errorf("keeps %q:\n%s", bad, got)
		}
	}
}
