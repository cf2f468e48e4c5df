package marker

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func parseString(t *testing.T, in string, loc *time.Location) *Result {
	t.Helper()
	r, err := Parse(strings.NewReader(in), loc)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

// checkProblems requires exactly len(want) problems, the i-th containing want[i].
func checkProblems(t *testing.T, what string, got []*ParseError, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d, want %d:\n%s", what, len(got), len(want), listProblems(got))
		return
	}
	for i, e := range got {
		if !strings.Contains(e.Error(), want[i]) {
			t.Errorf("%s[%d] = %q, want it to contain %q", what, i, e.Error(), want[i])
		}
		if prefix := fmt.Sprintf("line %d: ", e.Line); e.Line < 1 || !strings.HasPrefix(e.Error(), prefix) {
			t.Errorf("%s[%d] = %q does not begin with %q", what, i, e.Error(), prefix)
		}
	}
}

func listProblems(l []*ParseError) string {
	var b strings.Builder
	for _, e := range l {
		fmt.Fprintf(&b, "\t%s\n", e)
	}
	return b.String()
}

func TestParseMarkers(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		errs  []string
		warns []string
		check func(t *testing.T, r *Result)
	}{
		{
			name: "seed example",
			in: "Checked 3 PRs. PR #41 has merge conflicts.\n\n" +
				"[CRYO:EXIT 0] Reviewed 3 PRs: approved 2, commented on 1\n" +
				"[CRYO:PLAN PR #41 has conflicts, follow up next session]\n" +
				"[CRYO:WAKE 2025-02-24T09:00]\n" +
				"[CRYO:CMD opencode \"Follow up on PR #41 rebase, check for new PRs\"]\n" +
				"[CRYO:FALLBACK email user@example.com \"Monday PR review did not run\"]\n",
			check: func(t *testing.T, r *Result) {
				if *r.Exit != (Exit{Code: 0, Summary: "Reviewed 3 PRs: approved 2, commented on 1", Line: 3}) {
					t.Errorf("Exit = %+v", r.Exit)
				}
				if !slices.Equal(r.Plans, []Plan{{"PR #41 has conflicts, follow up next session", 4}}) {
					t.Errorf("Plans = %+v", r.Plans)
				}
				if r.Wake.Line != 5 || r.Wake.Time.Raw != "2025-02-24T09:00" || !r.Wake.Time.Abs.Equal(time.Date(2025, 2, 24, 9, 0, 0, 0, time.UTC)) {
					t.Errorf("Wake = %+v", r.Wake)
				}
				if r.Cmd.Line != 6 || r.Cmd.Raw != `opencode "Follow up on PR #41 rebase, check for new PRs"` ||
					!slices.Equal(r.Cmd.Args, []string{"opencode", "Follow up on PR #41 rebase, check for new PRs"}) {
					t.Errorf("Cmd = %+v", r.Cmd)
				}
				if !slices.Equal(r.Fallbacks, []Fallback{{"email", "user@example.com", "Monday PR review did not run", 7}}) {
					t.Errorf("Fallbacks = %+v", r.Fallbacks)
				}
			},
		},
		{
			name: "no markers",
			in:   "hello\n[not a marker]\n[CRYO without colon]\n[cryo-thing]\n[CRYO\n",
			check: func(t *testing.T, r *Result) {
				if r.Exit != nil || r.Wake != nil || r.Cmd != nil || r.Plans != nil || r.Fallbacks != nil || r.Replies != nil || r.Todos != nil {
					t.Errorf("result = %+v, want nothing", r)
				}
			},
		},
		{
			name: "keyword case and blanks after the colon",
			in:   "[cryo:exit 1] partial\n[Cryo:Wake +2h]\n[CRYO: plan\tnote]\n[CRYO:\tCmd claude]",
			check: func(t *testing.T, r *Result) {
				if r.Exit.Code != 1 || r.Exit.Summary != "partial" || r.Wake.Time.Rel != 2*time.Hour ||
					r.Plans[0].Text != "note" || r.Cmd.Args[0] != "claude" {
					t.Errorf("result = %+v", r)
				}
			},
		},
		{
			name: "several markers on a line; EXIT summary stops at the next marker",
			in:   "x [CRYO:PLAN a] y [CRYO:PLAN b][CRYO:EXIT 0]  done\t [cryo:WAKE +1h] trailing text ]]\n",
			check: func(t *testing.T, r *Result) {
				if !slices.Equal(r.Plans, []Plan{{"a", 1}, {"b", 1}}) || r.Exit.Summary != "done" || r.Wake.Time.Rel != time.Hour {
					t.Errorf("result = %+v %+v %+v", r.Plans, r.Exit, r.Wake)
				}
			},
		},
		{
			name: "EXIT with an empty summary, CRLF line ending",
			in:   "[CRYO:EXIT 2]\r\n[CRYO:EXIT  1 ]  ok \r\n",
			check: func(t *testing.T, r *Result) {
				if *r.Exit != (Exit{Code: 1, Summary: "ok", Line: 2}) {
					t.Errorf("Exit = %+v", r.Exit)
				}
			},
		},
		{
			name: "last EXIT, WAKE and CMD win",
			in:   "[CRYO:EXIT 0] a\n[CRYO:WAKE +1h]\n[CRYO:CMD a]\n[CRYO:EXIT 2] b\n[CRYO:WAKE +2h]\n[CRYO:CMD b]\n",
			check: func(t *testing.T, r *Result) {
				if r.Exit.Code != 2 || r.Exit.Line != 4 || r.Wake.Time.Rel != 2*time.Hour || r.Wake.Line != 5 || r.Cmd.Raw != "b" {
					t.Errorf("result = %+v %+v %+v", r.Exit, r.Wake, r.Cmd)
				}
			},
		},
		{
			name: "PLAN counts brackets and ignores quotes",
			in:   "[CRYO:PLAN check [PR] later]\n[CRYO:PLAN don't forget [a [b]] c]\n[CRYO:PLAN a \"quote] b\"]\n",
			check: func(t *testing.T, r *Result) {
				want := []Plan{{"check [PR] later", 1}, {"don't forget [a [b]] c", 2}, {`a "quote`, 3}}
				if !slices.Equal(r.Plans, want) {
					t.Errorf("Plans = %+v", r.Plans)
				}
			},
		},
		{
			name: "CMD: shell quotes, backslashes and brackets protect ]",
			in:   "[CRYO:CMD opencode \"fix ] bug\"]\n[CRYO:CMD a 'b]c' [d] \\] \"e\\\"]\"]\n",
			check: func(t *testing.T, r *Result) {
				if !slices.Equal(r.Cmd.Args, []string{"a", "b]c", "[d]", "]", `e"]`}) || r.Cmd.Line != 2 {
					t.Errorf("Cmd = %+v", r.Cmd)
				}
			},
			warns: []string{},
		},
		{
			name: "FALLBACK, REPLY and TODO: quotes protect ] and escapes work",
			in: `[CRYO:FALLBACK webhook https://h.example/x?a=1 "a ] \"b\" \\ c \n"]` + "\n" +
				`[CRYO:FALLBACK EMAIL Ops@Example.com "down"]` + "\n" +
				`[CRYO:REPLY "Done: see PR [41]"]` + "\n" +
				`[CRYO:TODO 2026-03-09T10:00 "check CI]"]` + "\n" +
				`[CRYO:TODO  +1d  "x"  ]` + "\n",
			check: func(t *testing.T, r *Result) {
				want := []Fallback{
					{"webhook", "https://h.example/x?a=1", `a ] "b" \ c \n`, 1},
					{"email", "Ops@Example.com", "down", 2},
				}
				if !slices.Equal(r.Fallbacks, want) {
					t.Errorf("Fallbacks = %+v", r.Fallbacks)
				}
				if !slices.Equal(r.Replies, []Reply{{"Done: see PR [41]", 3}}) {
					t.Errorf("Replies = %+v", r.Replies)
				}
				if len(r.Todos) != 2 || r.Todos[0].Text != "check CI]" || r.Todos[0].Time.Raw != "2026-03-09T10:00" ||
					r.Todos[1].Text != "x" || r.Todos[1].Time.Rel != 24*time.Hour || r.Todos[1].Line != 5 {
					t.Errorf("Todos = %+v", r.Todos)
				}
			},
		},
		{
			name: "identical FALLBACKs count once",
			in: `[CRYO:FALLBACK email a@b.example "m"]` + "\n" + `[CRYO:FALLBACK Email a@b.example "m"]` + "\n" +
				`[CRYO:FALLBACK email a@b.example "other"]` + "\n" + `[CRYO:FALLBACK email a@b.example "m"]` + "\n",
			check: func(t *testing.T, r *Result) {
				want := []Fallback{{"email", "a@b.example", "m", 1}, {"email", "a@b.example", "other", 3}}
				if !slices.Equal(r.Fallbacks, want) {
					t.Errorf("Fallbacks = %+v", r.Fallbacks)
				}
			},
		},
		{
			name:  "unknown keywords are warnings",
			in:    "[CRYO:FOO bar]\n[CRYO:]\n[CRYO:*] [CRYO:EXIT0]\n[CRYO:WAKEUP +1h]\n",
			warns: []string{`line 1: unknown marker keyword "FOO" ignored (want EXIT, WAKE`, "line 2: marker without a keyword ignored", `line 3: unknown marker keyword "*"`, `line 3: unknown marker keyword "EXIT0"`, `line 4: unknown marker keyword "WAKEUP"`},
			check: func(t *testing.T, r *Result) {
				if r.Wake != nil || r.Exit != nil {
					t.Errorf("result = %+v", r)
				}
			},
		},
		{
			name:  "an invalid WAKE superseded by a valid one is a warning",
			in:    "[CRYO:WAKE banana]\n[CRYO:WAKE +1h]\n",
			warns: []string{`line 1: WAKE "banana" ignored: the WAKE on line 2 wins`},
			check: func(t *testing.T, r *Result) {
				if r.Wake == nil || r.Wake.Line != 2 {
					t.Errorf("Wake = %+v", r.Wake)
				}
			},
		},
		{
			name: "an invalid last WAKE is an error and does not fall back to an earlier one",
			in:   "[CRYO:WAKE +1h]\n[CRYO:WAKE banana]\n",
			errs: []string{`line 2: WAKE "banana": not a time (want 2026-03-08T09:00`},
			check: func(t *testing.T, r *Result) {
				if r.Wake != nil {
					t.Errorf("Wake = %+v, want nil", r.Wake)
				}
			},
		},
		{
			name:  "invalid, valid, invalid",
			in:    "[CRYO:WAKE 2026-02-30T09:00]\n[CRYO:WAKE +1h]\n\n[CRYO:WAKE +0m]\n",
			errs:  []string{`line 4: WAKE "+0m": relative time must be more than zero`},
			warns: []string{`line 1: WAKE "2026-02-30T09:00" ignored: the WAKE on line 4 wins`},
		},
		{
			name: "two invalid WAKEs with no valid one are both errors",
			in:   "[CRYO:WAKE a]\n[CRYO:WAKE 2200-01-01T00:00]\n",
			errs: []string{`line 1: WAKE "a": not a time`, `line 2: WAKE "2200-01-01T00:00": year 2200 is after 2199`},
		},
		{
			name:  "superseded on the same line",
			in:    "[CRYO:WAKE soon] [CRYO:WAKE +1h] [CRYO:EXIT 9] x [CRYO:EXIT 0]",
			warns: []string{`line 1: WAKE "soon" ignored: the WAKE on line 1 wins`, `line 1: EXIT "9" ignored: the EXIT on line 1 wins`},
		},
		{
			name:  "EXIT codes",
			in:    "[CRYO:EXIT 07]\n[CRYO:EXIT -1]\n[CRYO:EXIT]\n[CRYO:EXIT 3]\n[CRYO:EXIT zero]\n[CRYO:EXIT 0 1]\n[CRYO:EXIT 1] fine\n[CRYO:EXIT 00] x\n",
			errs:  []string{`line 8: EXIT "00": code must be 0, 1 or 2`},
			warns: []string{`line 1: EXIT "07" ignored: the EXIT on line 8 wins`, `line 2: EXIT "-1" ignored`, `line 3: EXIT ignored: the EXIT on line 8 wins`, `line 4: EXIT "3" ignored`, `line 5: EXIT "zero" ignored`, `line 6: EXIT "0 1" ignored`},
			check: func(t *testing.T, r *Result) {
				if r.Exit != nil {
					t.Errorf("Exit = %+v, want nil", r.Exit)
				}
			},
		},
		{
			name: "EXIT errors",
			in:   "[CRYO:EXIT 07] a\n[CRYO:EXIT] b\n[CRYO:EXIT 0] bell\a\n",
			errs: []string{`line 1: EXIT "07": code must be 0, 1 or 2`, "line 2: EXIT: missing code (want 0 success, 1 partial or 2 failure)", "line 3: EXIT summary: control character U+0007"},
		},
		{
			name: "CMD errors",
			in: "[CRYO:CMD a; rm -rf ~]\n[CRYO:CMD ]\n[CRYO:CMD \"\" x]\n[CRYO:CMD a $(id)]\n[CRYO:CMD a 'b]\n" +
				"[CRYO:CMD a \"b]\n[CRYO:CMD a \\]\n",
			errs: []string{
				`line 1: CMD "a; rm -rf ~": unquoted ";" is shell syntax`,
				"line 2: CMD: empty command",
				`line 3: CMD "\"\" x": empty program name`,
				`line 4: CMD "a $(id)": unquoted "$("`,
				"line 5: CMD marker is not closed on this line (a marker must end with ] on the line it starts); a quote is not closed",
				"line 6: CMD marker is not closed on this line",
				"line 7: CMD marker is not closed on this line",
			},
		},
		{
			name: "unclosed markers",
			in:   "[CRYO:WAKE +1h\n[CRYO:FOO bar\nx [CRYO:\n[CRYO:PLAN a [b] [CRYO:EXIT 0] done\n[CRYO:REPLY \"a]\n",
			errs: []string{
				"line 1: WAKE marker is not closed on this line",
				`line 2: "[CRYO:FOO" marker is not closed`,
				`line 3: "[CRYO:" marker is not closed`,
				"line 4: PLAN marker is not closed",
				"line 5: REPLY marker is not closed on this line (a marker must end with ] on the line it starts); a quote is not closed",
			},
		},
		{
			name:  "an unclosed WAKE superseded by a valid one is a warning",
			in:    "[CRYO:WAKE 2026-03-08T09:00\n[CRYO:WAKE +1h]\n",
			warns: []string{`line 1: WAKE "2026-03-08T09:00" ignored: the WAKE on line 2 wins`},
		},
		{
			name: "PLAN errors",
			in:   "[CRYO:PLAN]\n[CRYO:PLAN  \t ]\n[CRYO:PLAN a\x1bb]\n[CRYO:PLAN a\xffb]\n[CRYO:PLAN a\u2028b]\n[CRYO:PLAN a\u0085b]\n[CRYO:PLAN ok\tfine]\n",
			errs: []string{
				"line 1: PLAN: empty note",
				"line 2: PLAN: empty note",
				"line 3: PLAN marker: control character U+001B (only tab is allowed)",
				"line 4: PLAN marker: invalid UTF-8",
				"line 5: PLAN marker: control character U+2028",
				"line 6: PLAN marker: control character U+0085",
			},
			check: func(t *testing.T, r *Result) {
				if !slices.Equal(r.Plans, []Plan{{"ok\tfine", 7}}) {
					t.Errorf("Plans = %+v", r.Plans)
				}
			},
		},
		{
			name: "bad bytes outside markers are ignored",
			in:   "\xff\xfe \x1b[31m red \x00 [CRYO:PLAN ok] \xff\n",
			check: func(t *testing.T, r *Result) {
				if len(r.Plans) != 1 {
					t.Errorf("Plans = %+v", r.Plans)
				}
			},
		},
		{
			name: "FALLBACK errors",
			in: `[CRYO:FALLBACK sms +15551234 "x"]` + "\n" +
				"[CRYO:FALLBACK]\n" +
				`[CRYO:FALLBACK email "msg"]` + "\n" +
				`[CRYO:FALLBACK email bob "m"]` + "\n" +
				`[CRYO:FALLBACK email Bob <b@x.org> "m"]` + "\n" +
				`[CRYO:FALLBACK email <b@x.org> "m"]` + "\n" +
				`[CRYO:FALLBACK webhook ftp://x.org/a "m"]` + "\n" +
				`[CRYO:FALLBACK webhook https:// "m"]` + "\n" +
				`[CRYO:FALLBACK webhook http:x.org "m"]` + "\n" +
				`[CRYO:FALLBACK webhook /hook "m"]` + "\n" +
				`[CRYO:FALLBACK email a@b.example msg]` + "\n" +
				`[CRYO:FALLBACK email a@b.example "m" x]` + "\n" +
				`[CRYO:FALLBACK email a@b.example]` + "\n" +
				`[CRYO:FALLBACK <email|webhook> <target> "<message>"]` + "\n",
			errs: []string{
				`line 1: unknown FALLBACK action "sms" (want email or webhook)`,
				"line 2: FALLBACK: missing action",
				"line 3: FALLBACK email: missing target",
				`line 4: FALLBACK email target "bob": not a single e-mail address`,
				`line 5: FALLBACK email target "Bob": not a single e-mail address`,
				`line 6: FALLBACK email target "<b@x.org>": not a single e-mail address`,
				`line 7: FALLBACK webhook target "ftp://x.org/a": not an absolute http or https URL`,
				`line 8: FALLBACK webhook target "https://": not an absolute http or https URL`,
				`line 9: FALLBACK webhook target "http:x.org": not an absolute`,
				`line 10: FALLBACK webhook target "/hook": not an absolute`,
				`line 11: FALLBACK email "a@b.example" message: text must be in double quotes`,
				`line 12: FALLBACK email "a@b.example" message: unexpected text after the closing quote: " x"`,
				`line 13: FALLBACK email "a@b.example" message: text must be in double quotes`,
				`line 14: unknown FALLBACK action "<email|webhook>"`,
			},
		},
		{
			name: "REPLY and TODO errors",
			in: "[CRYO:REPLY hello]\n[CRYO:REPLY \"\"]\n[CRYO:REPLY \"a\" \"b\"]\n" +
				"[CRYO:TODO +1d check]\n[CRYO:TODO tomorrow \"x\"]\n[CRYO:TODO +1h \"\"]\n[CRYO:TODO \"x\"]\n",
			errs: []string{
				`line 1: REPLY "hello": text must be in double quotes`,
				"line 2: REPLY: empty text",
				`line 3: REPLY "\"a\" \"b\"": unexpected text after the closing quote`,
				`line 4: TODO "+1d check": the text must be in double quotes`,
				`line 5: TODO "tomorrow": not a time`,
				`line 6: TODO "+1h": empty text`,
				"line 7: TODO: missing time",
			},
		},
		{
			name: "a marker over 64 KiB",
			in:   "[CRYO:PLAN " + strings.Repeat("x", MaxMarker) + "]\n[CRYO:PLAN " + strings.Repeat("y", MaxMarker-12) + "]\n",
			errs: []string{"line 1: PLAN marker is longer than 64 KiB"},
			check: func(t *testing.T, r *Result) {
				if len(r.Plans) != 1 || r.Plans[0].Line != 2 {
					t.Errorf("Plans: %d", len(r.Plans))
				}
			},
		},
		{
			name: "an EXIT summary over 64 KiB",
			in:   "[CRYO:EXIT 0] " + strings.Repeat("x", MaxMarker+1) + "\n",
			errs: []string{"line 1: EXIT summary is longer than 64 KiB"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseString(t, tt.in, time.UTC)
			checkProblems(t, "Errors", r.Errors, tt.errs)
			checkProblems(t, "Warnings", r.Warnings, tt.warns)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	repeat := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(f(i) + "\n")
		}
		return b.String()
	}
	tests := []struct {
		name  string
		in    string
		errs  []string
		count func(r *Result) int
		want  int
	}{
		{"PLAN", repeat(MaxPlans+5, func(i int) string { return fmt.Sprintf("[CRYO:PLAN p%d]", i) }),
			[]string{"line 101: more than 100 PLAN markers; this one and the rest are ignored"}, func(r *Result) int { return len(r.Plans) }, MaxPlans},
		{"FALLBACK", repeat(MaxFallbacks+1, func(i int) string { return fmt.Sprintf(`[CRYO:FALLBACK email a@b.example "m%d"]`, i) }),
			[]string{"line 17: more than 16 FALLBACK markers"}, func(r *Result) int { return len(r.Fallbacks) }, MaxFallbacks},
		{"identical FALLBACKs", repeat(100, func(int) string { return `[CRYO:FALLBACK email a@b.example "m"]` }),
			nil, func(r *Result) int { return len(r.Fallbacks) }, 1},
		{"REPLY", repeat(MaxReplies+1, func(i int) string { return fmt.Sprintf(`[CRYO:REPLY "r%d"]`, i) }),
			[]string{"line 65: more than 64 REPLY markers"}, func(r *Result) int { return len(r.Replies) }, MaxReplies},
		{"TODO", repeat(MaxTodos+1, func(i int) string { return fmt.Sprintf(`[CRYO:TODO +%dm "t"]`, i+1) }),
			[]string{"line 101: more than 100 TODO markers"}, func(r *Result) int { return len(r.Todos) }, MaxTodos},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseString(t, tt.in, nil)
			checkProblems(t, "Errors", r.Errors, tt.errs)
			if got := tt.count(r); got != tt.want {
				t.Errorf("kept %d, want %d", got, tt.want)
			}
		})
	}
}

// TestProblemsAreCapped: millions of bad markers must not grow memory; the count is still told.
func TestProblemsAreCapped(t *testing.T) {
	p := NewParser(nil)
	for n := 1; n <= 1000; n++ {
		p.Line(n, "[CRYO:PLAN] [CRYO:FOO] [CRYO:WAKE x]")
	}
	r := p.Result()
	if len(r.Errors) != 2*maxReported+2 || len(r.Warnings) != maxReported+1 {
		t.Fatalf("%d errors, %d warnings", len(r.Errors), len(r.Warnings))
	}
	checkProblems(t, "Errors", r.Errors[len(r.Errors)-2:], []string{
		"line 101: 900 more errors from this line on are not shown",
		"line 101: 900 more invalid WAKE markers from this line on are not shown",
	})
	checkProblems(t, "Warnings", r.Warnings[maxReported:], []string{"line 101: 900 more warnings from this line on are not shown"})

	// A valid WAKE now supersedes all the invalid ones, counted ones included.
	p.Line(1001, "[CRYO:WAKE +1h]")
	r = p.Result()
	if len(r.Errors) != maxReported+1 || r.Wake == nil || len(r.Warnings) != 2*maxReported+2 {
		t.Fatalf("%d errors, %d warnings, Wake %v", len(r.Errors), len(r.Warnings), r.Wake)
	}
	checkProblems(t, "Warnings", r.Warnings[:2], []string{
		`line 1: unknown marker keyword "FOO"`,
		`line 1: WAKE "x" ignored: the WAKE on line 1001 wins`,
	})
	checkProblems(t, "Warnings", r.Warnings[len(r.Warnings)-2:], []string{
		"line 101: 900 more warnings from this line on are not shown",
		"line 101: 900 more ignored WAKE markers from this line on are not shown",
	})
}

func TestParserLineNumbersAndResultCopies(t *testing.T) {
	p := NewParser(nil)
	p.Line(7, "[CRYO:WAKE banana]\n")
	p.Line(9, "[CRYO:CMD a b]")
	r := p.Result()
	checkProblems(t, "Errors", r.Errors, []string{`line 7: WAKE "banana": not a time`})
	var pe *ParseError
	if !errors.As(r.Errors[0], &pe) || pe.Keyword != "WAKE" || pe.Line != 7 || pe.Err == nil {
		t.Errorf("ParseError = %+v", pe)
	}
	r.Cmd.Args[0] = "changed"
	r.Errors[0] = nil
	r2 := p.Result()
	if r2.Cmd.Args[0] != "a" || r2.Errors[0] == nil {
		t.Errorf("Result shares state with the parser: %+v", r2)
	}
}

func TestParseLongLines(t *testing.T) {
	ok := strings.Repeat("a", MaxLine-len("[CRYO:PLAN x]")) + "[CRYO:PLAN x]"
	long := "[CRYO:WAKE +1h]" + strings.Repeat("b", MaxLine)
	in := ok + "\n" + long + "\n" + "[CRYO:PLAN after]\r\n" + strings.Repeat("c", MaxLine+1) + "\r\n" + long
	r := parseString(t, in, nil)
	checkProblems(t, "Errors", r.Errors, []string{
		"line 2: line is longer than 1 MiB; its markers were not read",
		"line 4: line is longer than 1 MiB",
		"line 5: line is longer than 1 MiB",
	})
	if r.Wake != nil || !slices.Equal(r.Plans, []Plan{{"x", 1}, {"after", 3}}) {
		t.Errorf("Wake %v, Plans %+v", r.Wake, r.Plans)
	}
}

func TestParseLastLineWithoutNewline(t *testing.T) {
	for _, in := range []string{"", "\n", "a\n[CRYO:EXIT 0] x", "a\n[CRYO:EXIT 0] x\n"} {
		r := parseString(t, in, nil)
		if in != "" && in != "\n" && (r.Exit == nil || r.Exit.Line != 2 || r.Exit.Summary != "x") {
			t.Errorf("Parse(%q): Exit = %+v", in, r.Exit)
		}
		if len(r.Errors) != 0 {
			t.Errorf("Parse(%q): %v", in, r.Errors)
		}
	}
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	r, err := Parse(io.MultiReader(strings.NewReader("[CRYO:PLAN a]\n"), iotest.ErrReader(boom)), nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "read line 2") {
		t.Fatalf("err = %v", err)
	}
	if r == nil || len(r.Plans) != 1 {
		t.Fatalf("Result = %+v", r)
	}
}

func TestParseUsesZone(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	r := parseString(t, "[CRYO:WAKE 2026-03-08T02:30]\n[CRYO:TODO 2026-11-01 01:30 \"x\"]\n", ny)
	if got := r.Wake.Time.Abs.Format(time.RFC3339); got != "2026-03-08T03:30:00-04:00" {
		t.Errorf("Wake = %s", got)
	}
	if got := r.Todos[0].Time.Abs.Format(time.RFC3339); got != "2026-11-01T01:30:00-04:00" {
		t.Errorf("Todo = %s", got)
	}
}
