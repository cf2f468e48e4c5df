package marker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// typicalOutput is what an agent session prints: mostly tool output and prose, some lines with
// brackets that are not markers, and the markers at the end.
func typicalOutput() []string {
	var lines []string
	for i := range 2000 {
		switch i % 5 {
		case 0:
			lines = append(lines, fmt.Sprintf("[INFO] step %d/2000: compiling package github.com/example/project/internal/pkg%d", i, i))
		case 1:
			lines = append(lines, "    at Object.<anonymous> (/home/user/project/src/index.test.ts:42:13) [expected 3, got 4]")
		case 2:
			lines = append(lines, "The test suite passed; I will now update NOTES.md with what I learned about the flaky test.")
		case 3:
			lines = append(lines, "")
		case 4:
			lines = append(lines, `{"level":"debug","msg":"request done","status":200,"path":"/api/v1/items?page=3"}`)
		}
	}
	return append(lines,
		"[CRYO:EXIT 0] Reviewed 3 PRs: approved 2, commented on 1",
		"[CRYO:PLAN PR #41 has conflicts, follow up next session]",
		"[CRYO:WAKE 2026-03-09T09:00]",
		`[CRYO:CMD opencode run "Follow up on PR #41 rebase, check for new PRs"]`,
		`[CRYO:FALLBACK email user@example.com "Monday PR review did not run"]`,
	)
}

func BenchmarkParser(b *testing.B) {
	lines := typicalOutput()
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	loc := time.UTC
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(loc)
		for i, l := range lines {
			p.Line(i+1, l)
		}
		if r := p.Result(); r.Exit == nil || len(r.Errors) != 0 {
			b.Fatalf("unexpected result: %+v", r)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	in := strings.Join(typicalOutput(), "\n") + "\n"
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(strings.NewReader(in), time.UTC); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTime(b *testing.B) {
	ny := mustLoad(b, "America/New_York")
	for b.Loop() {
		if _, err := ParseTime("2026-03-08T02:30", ny); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSplitCommand(b *testing.B) {
	for b.Loop() {
		if _, err := SplitCommand(`opencode run "Follow up on PR #41 rebase, check for new PRs" --model 'x y'`); err != nil {
			b.Fatal(err)
		}
	}
}
