package marker

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzParse(f *testing.F) {
	loc := mustLoad(f, "Europe/Berlin")
	f.Fuzz(func(t *testing.T, data string) {
		r1, err := Parse(strings.NewReader(data), loc)
		if err != nil {
			t.Fatalf("Parse of a string: %v", err)
		}
		r2, _ := Parse(strings.NewReader(data), loc)
		if !reflect.DeepEqual(r1, r2) {
			t.Fatalf("Parse is not deterministic:\n%+v\n%+v", r1, r2)
		}
		// Feeding lines one at a time gives the same result (the input is short: no line is
		// over MaxLine).
		p := NewParser(loc)
		lines := strings.Split(data, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		for i, l := range lines {
			p.Line(i+1, l)
		}
		if r3 := p.Result(); !reflect.DeepEqual(r1, r3) {
			t.Fatalf("Parser.Line and Parse differ:\n%+v\n%+v", r1, r3)
		}
		checkResult(t, r1)
	})
}

func checkResult(t *testing.T, r *Result) {
	t.Helper()
	bad := map[string]bool{}
	for _, list := range [][]*ParseError{r.Errors, r.Warnings} {
		for _, e := range list {
			msg := e.Error()
			if e.Line < 1 || !strings.HasPrefix(msg, fmt.Sprintf("line %d: ", e.Line)) || e.Msg == "" {
				t.Fatalf("problem without a proper line: %q (Line %d)", msg, e.Line)
			}
			if err := checkText(msg); err != nil {
				t.Fatalf("problem message %q: %v", msg, err)
			}
		}
	}
	for _, e := range r.Errors {
		bad[e.Keyword] = true
	}
	if r.Exit != nil && bad["EXIT"] || r.Wake != nil && bad["WAKE"] || r.Cmd != nil && bad["CMD"] {
		t.Fatalf("a marker is present despite an error for its keyword: %v", r.Errors)
	}
	text := func(what, s string) {
		if err := checkText(s); err != nil {
			t.Fatalf("%s %q: %v", what, s, err)
		}
	}
	checkTime := func(what string, tm Time) {
		if tm.Abs.IsZero() == (tm.Rel == 0) || tm.Rel < 0 || tm.Rel > maxRel {
			t.Fatalf("%s: not exactly one of Abs and Rel: %+v", what, tm)
		}
		if !tm.Abs.IsZero() && (tm.Abs.UTC().Year() < minYear || tm.Abs.UTC().Year() > maxYear) {
			t.Fatalf("%s: %v is out of range", what, tm.Abs)
		}
	}
	if r.Exit != nil {
		if r.Exit.Code < 0 || r.Exit.Code > 2 {
			t.Fatalf("Exit code %d", r.Exit.Code)
		}
		text("EXIT summary", r.Exit.Summary)
	}
	if r.Wake != nil {
		checkTime("WAKE", r.Wake.Time)
	}
	if c := r.Cmd; c != nil {
		if len(c.Args) == 0 || c.Args[0] == "" {
			t.Fatalf("CMD %q has no program", c.Raw)
		}
		if again, err := SplitCommand(c.Raw); err != nil || !slices.Equal(again, c.Args) {
			t.Fatalf("CMD %q re-split: %q, %v; want %q", c.Raw, again, err, c.Args)
		}
		if again, err := SplitCommand(JoinCommand(c.Args)); err != nil || !slices.Equal(again, c.Args) {
			t.Fatalf("CMD %q: joined and re-split: %q, %v; want %q", c.Raw, again, err, c.Args)
		}
	}
	if len(r.Plans) > MaxPlans || len(r.Fallbacks) > MaxFallbacks || len(r.Replies) > MaxReplies || len(r.Todos) > MaxTodos {
		t.Fatalf("over a limit: %d plans, %d fallbacks, %d replies, %d todos", len(r.Plans), len(r.Fallbacks), len(r.Replies), len(r.Todos))
	}
	for _, p := range r.Plans {
		if p.Text == "" {
			t.Fatal("empty PLAN kept")
		}
		text("PLAN", p.Text)
	}
	seen := map[Fallback]bool{}
	for _, fb := range r.Fallbacks {
		if fb.Action != "email" && fb.Action != "webhook" || checkTarget(fb.Action, fb.Target) != nil {
			t.Fatalf("FALLBACK kept: %+v", fb)
		}
		text("FALLBACK message", fb.Message)
		fb.Line = 0
		if seen[fb] {
			t.Fatalf("duplicate FALLBACK kept: %+v", fb)
		}
		seen[fb] = true
	}
	for _, rp := range r.Replies {
		text("REPLY", rp.Text)
	}
	for _, td := range r.Todos {
		checkTime("TODO", td.Time)
		text("TODO", td.Text)
	}
}

func FuzzParseTime(f *testing.F) {
	ny := mustLoad(f, "America/New_York")
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s, ny)
		tm2, err2 := ParseTime(s, ny)
		if tm != tm2 || (err == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %+v %v / %+v %v", tm, err, tm2, err2)
		}
		if err != nil {
			if tm != (Time{}) || err.Error() == "" {
				t.Fatalf("error %q with %+v", err, tm)
			}
			return
		}
		if tm.Raw != strings.Trim(s, " \t") || !utf8.ValidString(tm.Raw) {
			t.Fatalf("Raw = %q for %q", tm.Raw, s)
		}
		if tm.Relative() {
			if tm.Rel <= 0 || tm.Rel > maxRel || tm.Rel%time.Second != 0 || !tm.Abs.IsZero() {
				t.Fatalf("%q: %+v", s, tm)
			}
			return
		}
		if tm.Abs.IsZero() || tm.Abs.Location() != ny {
			t.Fatalf("%q: %+v", s, tm)
		}
		if y := tm.Abs.UTC().Year(); y < minYear || y > maxYear {
			t.Fatalf("%q: year %d", s, y)
		}
		// The instant written back with its offset reads as the same instant.
		back := tm.Abs.Format("2006-01-02T15:04:05.999999999Z07:00")
		again, err := ParseTime(back, time.UTC)
		if err != nil || !again.Abs.Equal(tm.Abs) {
			t.Fatalf("%q -> %s -> %v, %v", s, back, again.Abs, err)
		}
	})
}

func FuzzSplitCommand(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitCommand(s)
		again, err2 := SplitCommand(s)
		if !slices.Equal(words, again) || (err == nil) != (err2 == nil) {
			t.Fatalf("not deterministic")
		}
		if err != nil {
			if words != nil || err.Error() == "" {
				t.Fatalf("error %q with words %q", err, words)
			}
			return
		}
		for _, w := range words {
			if strings.IndexByte(w, 0) >= 0 {
				t.Fatalf("NUL in word %q", w)
			}
		}
		joined := JoinCommand(words)
		if back, err := SplitCommand(joined); err != nil || !slices.Equal(back, words) {
			t.Fatalf("%q -> %q -> %q -> %q, %v", s, words, joined, back, err)
		}
		// Without quotes or backslashes, splitting is just cutting at blanks.
		if !strings.ContainsAny(s, `'"\`) {
			want := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' })
			if len(want) == 0 {
				want = nil
			}
			if !slices.Equal(words, want) {
				t.Fatalf("%q: %q, want %q", s, words, want)
			}
		}
	})
}
