package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// logSizes are the sizes of the generated logs: with -cryo.full 1 MiB, 100 MiB and 1 GiB (at
// least 100,000 sessions); without it 1 MiB and 16 MiB, to keep the benchmark quick.
func logSizes() []struct {
	name string
	size int64
} {
	if *full {
		return []struct {
			name string
			size int64
		}{{"1 MiB", 1 << 20}, {"100 MiB", 100 << 20}, {"1 GiB", 1 << 30}}
	}
	return []struct {
		name string
		size int64
	}{{"1 MiB", 1 << 20}, {"16 MiB", 16 << 20}}
}

// rssTarget is the peak RSS every whole process must stay under.
const rssTarget = 32 << 20

// sizeCase is what one log size measured.
type sizeCase struct {
	name     string
	dir, log string
	sessions int
	hint     int64             // log_offset in timer.json
	lookup   time.Duration     // in-process Latest without a hint, median
	hinted   time.Duration     // in-process Latest with timer.json's offset, median
	procs    map[string][]proc // wall-time runs of each command
	peak     map[string]int64  // peak RSS of each command over its runs under GNU time
}

// BenchmarkLogSize measures what a long life costs: the latest-block lookup, and whole
// `cryochamber status` and `cryochamber validate` processes, on chambers whose logs were
// generated in the real format (1 MiB to 1 GiB), each then given one real session by
// `cryochamber start` against a private user manager. A naive whole-file reader is measured
// beside them as the baseline.
func BenchmarkLogSize(b *testing.B) {
	needBinary(b)
	m := systemdtest.Start(b)
	env := managerEnv(m)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	var cases []*sizeCase
	for _, sz := range logSizes() {
		dir := filepath.Join(root, fmt.Sprintf("chamber-%d", sz.size))
		chamber(b, dir, quickAgent, "")
		logPath := filepath.Join(dir, "cryo.log")
		t0 := time.Now()
		n := genLog(b, logPath, sz.size)
		b.Logf("%s: generated %d sessions in %s", sz.name, n, time.Since(t0).Round(time.Millisecond))
		if sz.size >= 1<<30 && n < 100_000 {
			b.Fatalf("the %s log holds %d sessions; the benchmark promises at least 100,000", sz.name, n)
		}
		// One real session on top: timer.json gets the log offset a real chamber has, and the
		// timers are armed, so status and validate read them back as they would.
		mustRun(b, env, dir, bin, "start", filepath.Join(dir, "plan.md"))
		cases = append(cases, &sizeCase{name: sz.name, dir: dir, log: logPath, sessions: n + 1, hint: logOffset(b, dir), procs: map[string][]proc{}, peak: map[string]int64{}})
	}
	// Paired rounds (paired_bench_test.go): the sizes take turns in every round, so that the load
	// of the shared machine falls on all of them alike.
	var lookups, hints []func() time.Duration
	for _, c := range cases {
		lookups = append(lookups, func() time.Duration { return timeLatest(b, c.log, -1, c.sessions) })
		hints = append(hints, func() time.Duration { return timeLatest(b, c.log, c.hint, c.sessions) })
	}
	lookupRounds, hintRounds := pairedRounds(301, nil, lookups...), pairedRounds(301, nil, hints...)
	for i, c := range cases {
		c.lookup, c.hinted = lookupRounds.median(i), hintRounds.median(i)
	}
	commands := []struct {
		key  string
		argv func(c *sizeCase) []string
		env  func(c *sizeCase) []string
		n    int
	}{
		{"latest", func(c *sizeCase) []string { return []string{self} }, func(c *sizeCase) []string { return []string{childEnv + "=latest:" + c.log} }, 11},
		{"naive", func(c *sizeCase) []string { return []string{self} }, func(c *sizeCase) []string { return []string{childEnv + "=naive:" + c.log} }, 5},
		{"status", func(c *sizeCase) []string { return []string{bin, "status", "--json", "--dir", c.dir} }, func(*sizeCase) []string { return env }, 11},
		{"validate", func(c *sizeCase) []string { return []string{bin, "validate", "--json", "--dir", c.dir} }, func(*sizeCase) []string { return env }, 11},
	}
	// Paired rounds (paired_bench_test.go): the sizes take turns in every round.
	paired := map[string]*rounds{}
	for _, cmd := range commands {
		var fns []func() time.Duration
		for _, c := range cases {
			fns = append(fns, func() time.Duration {
				p := mustRun(b, cmd.env(c), c.dir, cmd.argv(c)...)
				c.procs[cmd.key] = append(c.procs[cmd.key], p)
				return p.wall
			})
		}
		paired[cmd.key] = pairedRounds(reps(b, cmd.n), nil, fns...)
		for round := 0; round < 3; round++ {
			for _, c := range cases {
				p := mustRunRSS(b, cmd.env(c), c.dir, cmd.argv(c)...)
				c.peak[cmd.key] = max(c.peak[cmd.key], p.maxRSS)
			}
		}
	}
	report := func(metric, key string) {
		base := cases[0]
		for i, c := range cases {
			med, peak := median(walls(c.procs[key])), c.peak[key]
			value := fmt.Sprintf("%s, peak RSS %s", ms(med), mib(peak))
			target := "RSS < 32 MiB"
			met := peak < rssTarget
			if key == "naive" {
				target, met = "baseline", true
			}
			what := fmt.Sprintf("%s, %d sessions", c.name, c.sessions)
			switch {
			case i > 0:
				sp := paired[key].ratio(i, 0)
				value = fmt.Sprintf("%.2fx of %s (%s against %s), peak RSS %s", sp.med, base.name, ms(med), ms(median(walls(base.procs[key]))), mib(peak))
				var m *bool
				if key != "naive" && i == len(cases)-1 {
					target = "≤ 1.5x of " + base.name + "; RSS < 32 MiB"
					m = ok(met && sp.med <= 1.5)
				} else if key != "naive" {
					m = ok(met)
				}
				recordPaired(groupLog, metric, what, value, sp, target, m)
			case key == "naive":
				record(groupLog, metric, what, value, target, nil)
			default:
				record(groupLog, metric, what, value, target, ok(met))
			}
			b.ReportMetric(float64(med)/1e6, key+"-ms-"+strings.ReplaceAll(c.name, " ", ""))
		}
	}
	for i, c := range cases {
		what := fmt.Sprintf("%s, %d sessions", c.name, c.sessions)
		value := fmt.Sprintf("%s without hint, %s with timer.json's offset", us(c.lookup), us(c.hinted))
		target := ""
		var met *bool
		if i > 0 {
			sp := lookupRounds.ratio(i, 0)
			value = fmt.Sprintf("%.2fx of %s without hint (%s against %s), %s with timer.json's offset", sp.med, cases[0].name, us(c.lookup), us(cases[0].lookup), us(c.hinted))
			if i == len(cases)-1 {
				target = "≤ 1.5x of " + cases[0].name
				met = ok(sp.med <= 1.5)
			}
			recordPaired(groupLog, "latest-block lookup (sessionlog.Latest, in process)", what, value, sp, target, met)
			continue
		}
		record(groupLog, "latest-block lookup (sessionlog.Latest, in process)", what, value, target, met)
	}
	report("latest-block lookup + read the block (whole process)", "latest")
	report("naive reader: read the whole file, find the last SESSION (whole process)", "naive")
	report("`cryochamber status --json` (whole process)", "status")
	report("`cryochamber validate --json` (whole process)", "validate")
}

// logOffset reads log_offset from the chamber's timer.json.
func logOffset(tb testing.TB, dir string) int64 {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "timer.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var st struct {
		LogOffset int64 `json:"log_offset"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		tb.Fatal(err)
	}
	return st.LogOffset
}

// timeLatest times one sessionlog.Latest call in this process.
func timeLatest(tb testing.TB, path string, hint int64, want int) time.Duration {
	tb.Helper()
	t0 := time.Now()
	info, err := sessionlog.Latest(path, hint)
	d := time.Since(t0)
	if err != nil || info.Session != want {
		tb.Fatalf("Latest(%s, %d) = %+v, %v; want session %d", path, hint, info, err, want)
	}
	return d
}

func walls(ps []proc) []time.Duration {
	var w []time.Duration
	for _, p := range ps {
		w = append(w, p.wall)
	}
	return w
}

func us(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}
