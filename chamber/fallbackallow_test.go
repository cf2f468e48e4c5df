package chamber

import (
	"os"
	"strings"
	"testing"
)

// TestFallbackAllowExamples holds the examples of the fallback_allow grammar in docs/DESIGN.md
// to the matcher: every target in the "matches" column matches its pattern, none in the "does
// not match" column does.
func TestFallbackAllowExamples(t *testing.T) {
	data, err := os.ReadFile("../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "**`fallback_allow` patterns.**")
	if !ok {
		t.Fatal("docs/DESIGN.md has no fallback_allow section")
	}
	rows := 0
	for _, line := range strings.Split(table, "\n")[1:] {
		if strings.HasPrefix(line, "#") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.Contains(cells[1], "`") {
			continue
		}
		pattern := strings.Trim(strings.TrimSpace(cells[1]), "`")
		for col, want := range map[int]bool{2: true, 3: false} {
			for _, target := range strings.Split(cells[col], ",") {
				target = strings.Trim(strings.TrimSpace(target), "`")
				if got := globMatch(strings.ToLower(pattern), strings.ToLower(target)); got != want {
					t.Errorf("fallback_allow %q against %q: %v, docs/DESIGN.md says %v", pattern, target, got, want)
				}
			}
		}
		rows++
	}
	if rows < 5 {
		t.Fatalf("found %d example rows in docs/DESIGN.md", rows)
	}
}
