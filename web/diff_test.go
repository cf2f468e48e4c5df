package web_test

import (
	"strings"
	"testing"
)

// diffAgent writes, in session 1, a file whose text is an attack on the page and on a
// terminal, and a text file of 400 KiB (a patch longer than the page shows).
const diffAgent = `#!/bin/sh
printf '<script>alert("x")</script>\n\033[31mred\033]0;title\007\n' > hostile.txt
i=0; while [ $i -lt 8000 ]; do echo "line $i of a long file, fifty bytes or so"; i=$((i+1)); done > long.txt
echo "[CRYO:EXIT 0] wrote files"
echo "[CRYO:WAKE +1h]"
`

// TestSessionDiffOnPage: the session's page shows what it changed in the chamber, escaped,
// sanitized and bounded.
func TestSessionDiffOnPage(t *testing.T) {
	f := newFixture(t, map[string]string{"diff": diffAgent})
	code, body := f.get("/c/" + f.id("diff") + "?session=1")
	if code != 200 {
		t.Fatalf("session page: %d\n%s", code, body)
	}
	for _, want := range []string{"Files changed by session 1", "&#43;&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", "&#43;line 0 of a long file",
		"the diff is longer than the page shows", "d-add", "?session=1&amp;token=" /* the timeline's link */, "#diff\">2 file(s)</a>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, bad := range []string{`<script>alert("x")`, "\x1b", "\x07"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q raw", bad)
		}
	}
	if len(body) > 2<<20 {
		t.Errorf("the page is %d bytes: the diff is not bounded", len(body))
	}
}
