package chamber

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Issue 22: 200,000 symlinks planted in the inbox made every wake spend 139 s of CPU and every
// prompt 25.6 MB, one warning per name, de-duplicated in quadratic time. They are reported as
// one bounded summary: how many, of what kinds, and a few examples.
func TestStraysAreOneBoundedSummary(t *testing.T) {
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	inbox := filepath.Join(r.dir, inboxDir)
	if err := os.MkdirAll(inbox, 0o700); err != nil {
		t.Fatal(err)
	}
	const n = 20000 // the issue saw 200,000; the summary is bounded whatever the number
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("20261123T100000.%09dZ-x-%08x.md", i, i)
		if err := os.Symlink("/etc/passwd", filepath.Join(inbox, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(inbox, "20261123T100001.000000000Z-x-fifo.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := r.strays(inboxDir)
	if len(got) != 1 {
		t.Fatalf("strays gave %d lines, want one summary", len(got))
	}
	if len(got[0]) > 2000 || !strings.Contains(got[0], fmt.Sprint(n+1)) || !strings.Contains(got[0], "20000 symlinks") || !strings.Contains(got[0], "1 FIFO") {
		t.Fatalf("summary (%d bytes): %.600s", len(got[0]), got[0])
	}
	// What reaches the prompt is that one line.
	r.warnStrays(inboxDir)
	if w := uniqueStrings(append(r.warnings, r.warnings...)); len(w) != 1 {
		t.Fatalf("the prompt's warnings: %d", len(w))
	}
}

func TestUniqueStringsKeepsOrder(t *testing.T) {
	got := uniqueStrings([]string{"b", "a", "b", "c", "a"})
	if strings.Join(got, ",") != "b,a,c" {
		t.Fatalf("uniqueStrings = %v", got)
	}
}

// BenchmarkUniqueStrings measures de-duplication of many distinct warnings (linear: a map).
func BenchmarkUniqueStrings(b *testing.B) {
	in := make([]string, 100000)
	for i := range in {
		in[i] = fmt.Sprintf("warning %d", i)
	}
	for b.Loop() {
		uniqueStrings(in)
	}
}
