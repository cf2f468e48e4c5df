package bench

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// outputSize is what the agent prints: 500 MB with -cryo.full, 20 MB without.
func outputSize() int64 {
	if *full {
		return 500_000_000
	}
	return 20_000_000
}

// writeOutput writes size bytes of agent-like output to path: lines of 10 to 200 bytes of
// words (some of them UTF-8), a few with a tab, made from a 1 MiB pattern repeated.
func writeOutput(tb testing.TB, path string, size int64) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	var pat []byte
	for len(pat) < 1<<20 {
		line := 0
		for target := 10 + rng.IntN(190); line < target; {
			w := words[rng.IntN(len(words))]
			pat = append(pat, w...)
			pat = append(pat, ' ')
			line += len(w) + 1
		}
		if rng.IntN(10) == 0 {
			pat = append(pat, '\t', 'x')
		}
		pat = append(pat, '\n')
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for left := size; left > 0; {
		k := min(left, int64(len(pat)))
		if _, err := w.Write(pat[:k]); err != nil {
			tb.Fatal(err)
		}
		left -= k
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkAgentOutput runs a wake whose agent prints outputSize() bytes (cat of a generated
// file, then its markers) and compares it, in the same run, with the same bytes through
// `cat | cat` into a file (an agent's output reaches cryochamber through a pipe). Every variant
// ends with the file fsynced, as the END line of a session is. The log keeps every block: from
// the second wake on, the block before the session is as large as its own (a first wake, not
// measured, makes it so), as in a chamber whose agent always prints that much.
func BenchmarkAgentOutput(b *testing.B) {
	needBinary(b)
	m := systemdtest.Start(b)
	env := managerEnv(m)
	root := b.TempDir()
	// The agent runs in the session's sandbox, whose /tmp and /var/tmp are its own: the file it
	// prints lies in its chamber (left out of the snapshots by its size).
	dir := filepath.Join(root, "chamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	data := filepath.Join(dir, "output.txt")
	size := outputSize()
	writeOutput(b, data, size)
	agent := fmt.Sprintf("#!/bin/sh\ncat %s || exit 9\necho \"[CRYO:EXIT 0] printed %d bytes\"\necho \"[CRYO:WAKE +$((1440 + CRYO_SESSION))m]\"\n", shQuote(data), size)
	chamber(b, dir, agent, "watch_inbox = false\n")
	mustRun(b, env, dir, bin, "start", filepath.Join(dir, "plan.md"))
	logPath := filepath.Join(dir, "cryo.log")
	out := filepath.Join(root, "cat.out")
	mustRun(b, env, dir, bin, "wake", "--now", "--dir", dir) // the block before every measured wake is as large

	// Paired rounds (paired_bench_test.go): cat alone, `cat | cat` and the wake take turns in
	// every round; the ratios are taken within the round. Eleven rounds at full size (about
	// 3 s each): five gave medians of 1.19x and 1.59x on the same tree an hour apart.
	var peak int64
	n := reps(b, 11)
	r := pairedRounds(n, []string{"cat", "pipe", "wake"},
		func() time.Duration {
			defer os.Remove(out)
			return mustRun(b, nil, root, "/bin/sh", "-c", `cat "$1" > "$2" && sync "$2"`, "sh", data, out).wall
		},
		func() time.Duration {
			defer os.Remove(out)
			return mustRun(b, nil, root, "/bin/sh", "-c", `cat "$1" | cat > "$2" && sync "$2"`, "sh", data, out).wall
		},
		func() time.Duration {
			p := mustRunRSS(b, env, dir, bin, "wake", "--now", "--dir", dir)
			peak = max(peak, p.maxRSS)
			if !strings.Contains(p.out, "EXIT 0 printed") {
				b.Fatalf("the wake did not read the agent's EXIT after its output:\n%s", p.out)
			}
			return p.wall
		})
	fi, err := os.Stat(logPath)
	if err != nil || fi.Size() < int64(n+1)*size {
		b.Fatalf("cryo.log holds %v bytes after the wakes, want more than %d (%v)", fi.Size(), int64(n+1)*size, err)
	}
	rate := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e6 }
	mc, mp, mw := r.median(0), r.median(1), r.median(2)
	what := fmt.Sprintf("%d MB of output", size/1_000_000)
	record(groupOutput, "baseline: `cat FILE > OUT` + fsync", what, fmt.Sprintf("%s, %.0f MB/s (n=%d)", ms(mc), rate(mc), n), "", nil)
	record(groupOutput, "baseline: `cat FILE` piped into `cat > OUT`, + fsync", what, fmt.Sprintf("%s, %.0f MB/s (n=%d)", ms(mp), rate(mp), n), "", nil)
	s := r.ratio(2, 1)
	recordPaired(groupOutput, "`cryochamber wake` whose agent is `cat FILE` (lines prefixed, markers parsed; fsynced), the block before it as large / `cat | cat`", what,
		fmt.Sprintf("%.2fx (%s, %.0f MB/s, against %s); %.2fx of cat alone", s.med, ms(mw), rate(mw), ms(mp), r.ratio(2, 0).med),
		s, "≤ 1.25x of `cat | cat`", ok(s.med <= 1.25))
	record(groupOutput, "`cryochamber wake` peak RSS while its agent prints", what, mib(peak), "< 32 MiB", ok(peak < rssTarget))
	b.ReportMetric(rate(mw), "MB/s")
	b.ReportMetric(s.med, "wake/pipe")
}

// shQuote quotes s for sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
