package bench

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

var (
	full      = flag.Bool("cryo.full", false, "full sizes and counts (make bench); without it, small inputs that run in seconds")
	binFlag   = flag.String("cryo.bin", "", "the cryochamber binary to measure (default: build one from this module)")
	tableOut  = flag.String("cryo.table", "", "also write the final table (Markdown) to this file")
	keepTrace = flag.String("cryo.trace", "", "keep the strace log of the last traced wake in this directory")
)

// bin is the cryochamber binary every whole-process measurement runs: -cryo.bin, else one built
// from this module the first time a benchmark asks for it (plain `go test` builds nothing).
// Benchmarks call needBinary first.
var (
	bin      string
	binOnce  sync.Once
	binErr   error
	builtDir string
)

// quietDisk writes back what earlier benchmarks left dirty (the 500 MB outputs, the generated
// logs) before a benchmark whose time is mostly fsyncs: otherwise a wake's four fsyncs queue
// behind gigabytes of the benchmarks' own writeback, which no real wake meets.
func quietDisk() { syscall.Sync() }

func needBinary(tb testing.TB) {
	tb.Helper()
	binOnce.Do(func() {
		if *binFlag != "" {
			bin, binErr = filepath.Abs(*binFlag)
			return
		}
		builtDir, binErr = os.MkdirTemp("", "cryo-bench-bin-")
		if binErr != nil {
			return
		}
		bin = filepath.Join(builtDir, "cryochamber")
		build, err := fixture.BuildCommand(bin) // as make build builds it: static, no docs.go
		if err != nil {
			binErr = err
			return
		}
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("building cryochamber: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
}

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	flag.Parse()
	load0 := loadavg()
	code := m.Run()
	printTable(os.Stdout, load0, loadavg())
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// row is one line of the table `make bench` prints.
type row struct {
	group  int // the section of the table: rows are sorted by group, then in the order recorded
	order  int
	metric string
	what   string // the size or case
	value  string
	rounds string  // paired rounds behind a compared figure (paired_bench_test.go); "" otherwise
	spread string  // min–max and IQR of the per-round ratios
	load   string  // the load average while it was measured
	loadAt float64 // the same as a number (the median over paired rounds)
	target string
	met    string // "yes", "NO", or "" when there is no target
}

var (
	rowsMu sync.Mutex
	rows   = map[string]row{} // by metric and case: a benchmark run again replaces its rows
	seqNo  int
)

// Sections of the table.
const (
	groupLog = iota + 1
	groupYears
	groupChambers
	groupWake
	groupPhase
	groupArm
	groupOutput
	groupTimer
)

// record adds a row that is not a comparison (or replaces the row of the same metric and
// case); its load column is the load average as it is recorded. Compared figures use
// recordPaired.
func record(group int, metric, what, value, target string, met *bool) {
	l := load1()
	recordRow(row{group: group, metric: metric, what: what, value: value, target: target, load: fmt.Sprintf("%.1f", l), loadAt: l}, met)
}

// quietLoad is the load average above which a met target is marked "not final".
const quietLoad = 2.0

func recordRow(r row, met *bool) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	key := r.metric + "\x00" + r.what
	if old, ok := rows[key]; ok {
		r.order = old.order
	} else {
		seqNo++
		r.order = seqNo
	}
	r.met = ""
	if met != nil {
		r.met = map[bool]string{true: "yes", false: "NO"}[*met]
		if *met && r.loadAt > quietLoad {
			// A goal is not claimed from a loaded machine: the figure may hold, but nobody
			// measuring on a quiet one has confirmed it.
			r.met = fmt.Sprintf("yes at load %.1f: not final", r.loadAt)
		}
	}
	rows[key] = r
}

func ok(b bool) *bool { return &b }

func printTable(w io.Writer, load0, load1 string) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rows) == 0 {
		return
	}
	list := make([]row, 0, len(rows))
	for _, r := range rows {
		list = append(list, r)
	}
	slices.SortFunc(list, func(a, b row) int {
		if a.group != b.group {
			return a.group - b.group
		}
		return a.order - b.order
	})
	head := row{metric: "metric", what: "size/case", value: "value (median)", rounds: "rounds", spread: "spread of the rounds", load: "load", target: "target", met: "met?"}
	cells := func(r row) []string {
		return []string{r.metric, r.what, r.value, r.rounds, r.spread, r.load, r.target, r.met}
	}
	width := make([]int, 8)
	for _, r := range append([]row{head}, list...) {
		for i, c := range cells(r) {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var buf bytes.Buffer
	line := func(cs []string) {
		buf.WriteString("|")
		for i, c := range cs {
			buf.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		buf.WriteString("\n")
	}
	mode := "small inputs (without -cryo.full)"
	if *full {
		mode = "full sizes (-cryo.full)"
	}
	host, _ := os.Hostname()
	fmt.Fprintf(&buf, "\ncryochamber benchmarks, %s, %s/%s, %d CPUs, host %s, %s\n", mode, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), host, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&buf, "load average before: %s; after: %s\n\n", load0, load1)
	fmt.Fprintf(&buf, "A compared figure (a ratio) is the median of paired rounds: in each round every case ran once, in turn, and the ratio was taken within the round; spread is the min–max (and interquartile range) of the per-round ratios; load is the 1-minute load average over the rounds, median (min–max), or when the row was recorded. A target met at a load above 2 says \"not final\".\n\n")
	line(cells(head))
	sep := make([]string, 8)
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range list {
		line(cells(r))
	}
	w.Write(buf.Bytes())
	if *tableOut != "" {
		if err := os.WriteFile(*tableOut, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		}
	}
}

// loadavg is the first three fields of /proc/loadavg: the machine is shared, and the figures
// mean little without it.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// proc is one finished whole process.
type proc struct {
	wall   time.Duration
	maxRSS int64 // bytes; 0 unless measured with runRSS
	status int
	out    string // stdout and stderr, cut to the last 64 KiB
}

// tailBuffer keeps the last 64 KiB written to it: a process that prints a lot must not grow the
// benchmark's own memory.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	const keep = 64 << 10
	t.b = append(t.b, p...)
	if len(t.b) > 2*keep {
		t.b = append(t.b[:0], t.b[len(t.b)-keep:]...)
	}
	return len(p), nil
}

// run runs argv as a whole process in dir with env, and measures its wall time from start to
// the end of wait.
func run(tb testing.TB, env []string, dir string, argv ...string) proc {
	tb.Helper()
	var out tailBuffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", strings.Join(argv, " "), err)
	}
	err := cmd.Wait()
	p := proc{wall: time.Since(start), out: string(out.b), status: cmd.ProcessState.ExitCode()}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		tb.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return p
}

// timeBinary is GNU time, which reports the peak RSS of the command it forks.
//
// The peak RSS of a process that Go starts cannot be read from its own wait4: os/exec starts
// children with clone(CLONE_VM|CLONE_VFORK), and at execve the kernel records the high-water RSS
// of the memory the child shared until then, the parent's, as the child's ru_maxrss. (Measured
// here: every child of the benchmark reported exactly the benchmark's own RSS.) GNU time forks
// its command with fork(), so the floor is GNU time's own RSS, about 2 MiB.
const timeBinary = "/usr/bin/time"

// runRSS is run under GNU time: wall time as run's (plus GNU time's fork and exec, about a
// millisecond) and the peak RSS (ru_maxrss) of the command.
func runRSS(tb testing.TB, env []string, dir string, argv ...string) proc {
	tb.Helper()
	if _, err := os.Stat(timeBinary); err != nil {
		tb.Skipf("%s (GNU time, Debian package time) is needed to measure the peak RSS of a child: %v", timeBinary, err)
	}
	f, err := os.CreateTemp("", "cryo-bench-rss-")
	if err != nil {
		tb.Fatal(err)
	}
	f.Close()
	defer os.Remove(f.Name())
	p := run(tb, env, dir, append([]string{timeBinary, "-f", "%M", "-o", f.Name(), "--"}, argv...)...)
	data, err := os.ReadFile(f.Name())
	if err != nil {
		tb.Fatal(err)
	}
	// GNU time writes "Command exited with non-zero status N" before the figure when it did.
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		tb.Fatalf("%s wrote no peak RSS for %s", timeBinary, strings.Join(argv, " "))
	}
	kib, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
	if err != nil {
		tb.Fatalf("%s: peak RSS %q: %v", timeBinary, data, err)
	}
	p.maxRSS = kib << 10
	return p
}

// mustRun is run that fails the benchmark unless the process exits 0.
func mustRun(tb testing.TB, env []string, dir string, argv ...string) proc {
	tb.Helper()
	return must(tb, run(tb, env, dir, argv...), argv)
}

// mustRunRSS is runRSS that fails the benchmark unless the process exits 0.
func mustRunRSS(tb testing.TB, env []string, dir string, argv ...string) proc {
	tb.Helper()
	return must(tb, runRSS(tb, env, dir, argv...), argv)
}

func must(tb testing.TB, p proc, argv []string) proc {
	tb.Helper()
	if p.status != 0 {
		tb.Fatalf("%s: exit %d\n%s", strings.Join(argv, " "), p.status, p.out)
	}
	return p
}

// managerEnv is the environment of a cryochamber process that uses the private manager m.
func managerEnv(m *systemdtest.Manager) []string {
	return append(m.Env(), "TZ=UTC", "LANG=C.UTF-8")
}

// chamber writes a chamber into dir: plan.md, cryo.toml (agent = ./agent.sh plus extra lines)
// and the executable agent.sh.
func chamber(tb testing.TB, dir, agent, extraToml string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	files := []struct {
		name string
		data string
		mode os.FileMode
	}{
		{"plan.md", "A benchmark plan: do one step, then wake tomorrow.\n", 0o644},
		{"cryo.toml", "agent = \"./agent.sh\"\n" + extraToml, 0o644},
		{"agent.sh", agent, 0o755},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.data), f.mode); err != nil {
			tb.Fatal(err)
		}
	}
}

// quickAgent prints its markers and exits at once. The next wake is about a day later, and a
// different second for every session (session n asks for 1 day + n minutes), as in real use:
// two wakes in the same second asking for the same +1d would find the timers already armed for
// that time, which the backend rightly skips.
const quickAgent = `#!/bin/sh
echo "did one step"
echo "[CRYO:EXIT 0] step done"
echo "[CRYO:WAKE +$((1440 + CRYO_SESSION))m]"
`

// Statistics over samples (they are sorted in place).

func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := q * float64(len(d)-1)
	lo := int(i)
	if lo+1 >= len(d) {
		return d[lo]
	}
	frac := i - float64(lo)
	return d[lo] + time.Duration(frac*float64(d[lo+1]-d[lo]))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f ms", f)
	case f >= 10:
		return fmt.Sprintf("%.1f ms", f)
	}
	return fmt.Sprintf("%.2f ms", f)
}

// reps is how many measurements a benchmark takes: b.N, and at least n with -cryo.full (3
// without).
func reps(b *testing.B, n int) int {
	if *full {
		return max(n, b.N)
	}
	return max(b.N, min(n, 3)) // three paired rounds at least, so that a spread shows
}
