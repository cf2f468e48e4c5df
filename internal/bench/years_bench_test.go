package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cryo "github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// The cases that matter for years: a chamber five years old, many chambers in one user
// manager, and a session that printed half a gigabyte. Each compares, in the same run and in
// alternating rounds, the case with a fresh or small one on the same machine: the ratio is the
// figure, since the absolute times move with the load of the shared machine.

// yearsCounts is what the five-year chamber holds: a session every hour for five years (with
// -cryo.full), each answering one message, and the TODOs of such a plan.
func yearsCounts() (sessions, replies, archived, doneTodos int) {
	if *full {
		return 44_000, 44_000, 44_000, 20_000
	}
	return 2_000, 2_000, 2_000, 1_000
}

// mailboxKeep is chamber's: outbox items and claimed messages of the months that ended more
// than 35 days ago live in a directory per month (chamber/rotate.go).
const mailboxKeep = 35 * 24 * time.Hour

// stateDirOf is the private state directory of the chamber at dir, for the manager's HOME.
func stateDirOf(m *systemdtest.Manager, dir string) string {
	return filepath.Join(m.Home, ".local", "state", "cryochamber", "chambers", timer.ID(dir))
}

// genYears fills dir (a chamber with plan.md, cryo.toml, agent.sh) with five years of an
// hourly plan in the layout cryochamber leaves: cryo.log with one block per hour, the replies
// and the claimed messages in the live directories (the last one to two months) and in month
// directories (the rest), and returns the number of sessions. The private state (TODOs, the
// history index) is written by genYearsState once `start` has made the state directory.
func genYears(tb testing.TB, dir string, now time.Time) int {
	tb.Helper()
	sessions, replies, archived, _ := yearsCounts()
	first := now.Add(-time.Duration(sessions+1) * time.Hour).Truncate(time.Hour)
	f, err := os.OpenFile(filepath.Join(dir, "cryo.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(5, 6))
	var buf []byte
	for n := 1; n <= sessions; n++ {
		buf = appendSession(buf[:0], sessionAt(n, first.Add(time.Duration(n-1)*time.Hour), rng))
		if _, err := w.Write(buf); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	c := now.Add(-mailboxKeep)
	cutoff := time.Date(c.Year(), c.Month(), 1, 0, 0, 0, 0, time.UTC)
	place := func(sub string, at time.Time, id string, m *message.Message) {
		d := filepath.Join(dir, sub)
		if at.Before(cutoff) {
			d = filepath.Join(d, at.Format(message.MonthLayout))
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
		data, err := m.Marshal()
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, at.Format("20060102T150405.000000000Z")+"-"+id+".md"), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 0; i < archived; i++ {
		at := first.Add(time.Duration(i)*time.Hour + 17*time.Minute)
		place(message.ArchiveDir, at, fmt.Sprintf("alice-%08x", i), &message.Message{From: "alice", Time: at, Kind: message.KindMessage,
			Body: fmt.Sprintf("Question %d: how is the build of PR #%d?\n", i, 40+i%7)})
	}
	for i := 0; i < replies; i++ {
		at := first.Add(time.Duration(i)*time.Hour + 20*time.Minute)
		place(message.OutboxDir, at, fmt.Sprintf("session%d-reply0", i+1), &message.Message{From: "agent", Time: at, Kind: message.KindReply, Session: i + 1,
			InReplyTo: []string{fmt.Sprintf("alice-%08x", i)}, Body: fmt.Sprintf("The build of PR #%d passed; merged.\n", 40+i%7)})
	}
	return sessions
}

// genYearsState writes the private state of five years into the state directory `start` made:
// todo.json with the 100 most recent finished TODOs and three pending ones (as compaction
// leaves it), the yearly archives of the others, and the yearly history index.
func genYearsState(tb testing.TB, stateDir, dir string, now time.Time) {
	tb.Helper()
	sessions, _, _, done := yearsCounts()
	first := now.Add(-time.Duration(sessions+1) * time.Hour).Truncate(time.Hour)
	var items []cryo.Todo
	archives := map[int]*strings.Builder{}
	for i := 0; i < done; i++ {
		at := first.Add(time.Duration(i*sessions/done) * time.Hour)
		t := cryo.Todo{ID: fmt.Sprintf("s%d-0", i+1), Text: fmt.Sprintf("check the release of v1.%d", i), At: at, Status: "done", Session: i + 2, Created: at.Add(-time.Hour)}
		if i >= done-100 {
			items = append(items, t)
			continue
		}
		line, _ := json.Marshal(t)
		if archives[at.Year()] == nil {
			archives[at.Year()] = &strings.Builder{}
		}
		archives[at.Year()].Write(append(line, '\n'))
	}
	for i := 0; i < 3; i++ {
		at := now.Add(time.Duration(30+i) * 24 * time.Hour).Truncate(time.Second)
		items = append(items, cryo.Todo{ID: fmt.Sprintf("p%d", i), Text: "renew the certificate", At: at, Status: "pending", Created: now.Add(-time.Hour)})
	}
	data, err := json.MarshalIndent(map[string]any{"version": 1, "items": items}, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range []string{filepath.Join(stateDir, "todo.json"), filepath.Join(dir, "todo.json")} {
		if err := os.WriteFile(p, append(data, '\n'), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	for year, b := range archives {
		if err := os.WriteFile(filepath.Join(stateDir, fmt.Sprintf("todo-archive-%d.jsonl", year)), []byte(b.String()), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	hist := map[int]*strings.Builder{}
	for n := 1; n <= sessions; n++ {
		at := first.Add(time.Duration(n-1) * time.Hour)
		row, _ := json.Marshal(cryo.HistoryRow{Session: n, Why: cryo.WhyPlan, Due: at, Started: at, Late: "0s", Ended: at.Add(4 * time.Minute),
			Duration: "4m0s", Outcome: "ok", Summary: fmt.Sprintf("step %d done", n), Answered: 1, Replies: 1})
		if hist[at.Year()] == nil {
			hist[at.Year()] = &strings.Builder{}
		}
		hist[at.Year()].Write(append(row, '\n'))
	}
	for year, b := range hist {
		if err := os.WriteFile(filepath.Join(stateDir, fmt.Sprintf("history-%d.jsonl", year)), []byte(b.String()), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// countFiles counts the regular files below dir.
func countFiles(tb testing.TB, dir string) int {
	tb.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// BenchmarkFiveYears compares whole `wake --now`, `status --json` and `validate --json`
// processes on a chamber five years old (genYears, then `start` and one wake, as in use) with
// the same commands on a fresh chamber, in one user manager, in alternating rounds.
func BenchmarkFiveYears(b *testing.B) {
	quietDisk()
	needBinary(b)
	m := systemdtest.Start(b)
	env := managerEnv(m)
	root := b.TempDir()
	now := time.Now().UTC()
	old := filepath.Join(root, "five-years")
	chamber(b, old, quickAgent, "")
	t0 := time.Now()
	sessions := genYears(b, old, now)
	mustRun(b, env, old, bin, "start", filepath.Join(old, "plan.md"))
	genYearsState(b, stateDirOf(m, old), old, now)
	mustRun(b, env, old, bin, "wake", "--now", "--dir", old)
	b.Logf("generated the five-year chamber (%d sessions) in %s", sessions, time.Since(t0).Round(time.Millisecond))
	fresh := filepath.Join(root, "fresh")
	chamber(b, fresh, quickAgent, "")
	mustRun(b, env, fresh, bin, "start", filepath.Join(fresh, "plan.md"))
	mustRun(b, env, fresh, bin, "wake", "--now", "--dir", fresh)

	_, replies, archived, done := yearsCounts()
	logSize := int64(0)
	if fi, err := os.Stat(filepath.Join(old, "cryo.log")); err == nil {
		logSize = fi.Size()
	}
	live, _ := os.ReadDir(filepath.Join(old, message.OutboxDir))
	what := fmt.Sprintf("%d hourly sessions (log %d MiB), %d replies and %d claimed messages (%d files in the live outbox), %d done TODOs; against a fresh chamber",
		sessions, logSize>>20, replies, archived, len(live), done)
	if got := countFiles(b, filepath.Join(old, "messages")); got < replies+archived {
		b.Fatalf("the mailbox holds %d files, want %d", got, replies+archived)
	}

	commands := []struct{ key, metric string }{
		{"wake", "`cryochamber wake --now`"}, {"status", "`cryochamber status --json`"}, {"validate", "`cryochamber validate --json`"},
		{"history", "`cryochamber history --json` (the last 50 rows, its default)"},
		{"history-all", "`cryochamber history --json --all` (every row, streamed: the time grows with the rows, the memory must not)"},
	}
	argv := func(key, dir string) []string {
		switch key {
		case "wake":
			return []string{bin, "wake", "--now", "--dir", dir}
		case "status":
			return []string{bin, "status", "--json", "--dir", dir}
		case "history":
			return []string{bin, "history", "--json", "--dir", dir}
		case "history-all":
			return []string{bin, "history", "--json", "--all", "--dir", dir}
		}
		return []string{bin, "validate", "--json", "--dir", dir}
	}
	// Paired rounds (paired_bench_test.go): per command, the five-year and the fresh chamber take
	// turns in every round, and the ratio is taken within the round.
	n := reps(b, 21)
	for _, c := range commands {
		r := pairedRounds(n, []string{"five-years", "fresh"},
			func() time.Duration { return mustRun(b, env, old, argv(c.key, old)...).wall },
			func() time.Duration { return mustRun(b, env, fresh, argv(c.key, fresh)...).wall })
		peak := map[string]int64{}
		for i := 0; i < 3; i++ {
			for _, d := range []string{old, fresh} {
				peak[d] = max(peak[d], mustRunRSS(b, env, d, argv(c.key, d)...).maxRSS)
			}
		}
		s := r.ratio(0, 1)
		target, met := "≤ 1.2x; RSS < 32 MiB", s.med <= 1.2 && peak[old] < rssTarget
		if c.key == "history-all" {
			target, met = "RSS < 32 MiB", peak[old] < rssTarget
		}
		recordPaired(groupYears, c.metric+" on a five-year chamber / on a fresh one (whole process)", what,
			fmt.Sprintf("%.2fx (%s against %s); peak RSS %s against %s", s.med, ms(r.median(0)), ms(r.median(1)), mib(peak[old]), mib(peak[fresh])),
			s, target, ok(met))
		b.ReportMetric(s.med, c.key+"-ratio")
	}

	// The dashboard's page of each chamber (web_bench_test.go): one `cryochamber web`, the two
	// pages asked in turns, as a user switching between them. The first visit of each (which
	// finds the chambers with ps) is not measured: the page itself reads its chamber afresh at
	// every visit.
	d := startDashboard(b, env)
	oldID, freshID := timer.ID(old), timer.ID(fresh)
	d.chamberPage(b, oldID, old)
	d.chamberPage(b, freshID, fresh)
	r := pairedRounds(n, []string{"five-years", "fresh"},
		func() time.Duration { return d.chamberPage(b, oldID, old) },
		func() time.Duration { return d.chamberPage(b, freshID, fresh) })
	d.stop(b)
	s := r.ratio(0, 1)
	recordPaired(groupYears, "dashboard chamber page on a five-year chamber / on a fresh one (whole process: `cryochamber web`, HTTP GET with the token)", what,
		fmt.Sprintf("%.2fx (%s against %s)", s.med, ms(r.median(0)), ms(r.median(1))), s, "≤ 1.2x", ok(s.med <= 1.2))
	b.ReportMetric(s.med, "web-page-ratio")

	// Where `status` on the five-year chamber spends what the fresh one does not (perf and strace
	// of both, 2026-11-27): it opens no file that grows with the years, but it lists the live
	// outbox to count it (1,441 files at full size: getdents and ext4's hashed-directory walk,
	// about 1.5 ms in process on this machine under load) and parses todo.json (the 100 latest
	// finished TODOs that compaction keeps, and the pending ones). Both are bounded (rotation
	// keeps one to two months in the live outbox; compaction 100 finished TODOs), so a chamber of
	// two busy months costs the same; a fresh chamber has neither. These rows take them away in
	// turn, in paired rounds again, so that the table shows how much of the ratio each is.
	statusRatio := func() spread {
		r := pairedRounds(n, []string{"five-years", "fresh"},
			func() time.Duration { return mustRun(b, env, old, argv("status", old)...).wall },
			func() time.Duration { return mustRun(b, env, fresh, argv("status", fresh)...).wall })
		return r.ratio(0, 1)
	}
	aside := func(path string) func() {
		if err := os.Rename(path, path+".aside"); err != nil {
			b.Fatal(err)
		}
		return func() {
			if err := os.Rename(path+".aside", path); err != nil {
				b.Fatal(err)
			}
		}
	}
	outbox := filepath.Join(old, message.OutboxDir)
	restoreOutbox := aside(outbox)
	if err := os.Mkdir(outbox, 0o700); err != nil {
		b.Fatal(err)
	}
	s = statusRatio()
	recordPaired(groupYears, "`cryochamber status --json` on the five-year chamber without its live outbox (moved aside: what counting it costs) / on a fresh one", what,
		fmt.Sprintf("%.2fx", s.med), s, "", nil)
	restoreTodos := aside(filepath.Join(stateDirOf(m, old), "todo.json"))
	s = statusRatio()
	recordPaired(groupYears, "`cryochamber status --json` on the five-year chamber without its live outbox and its todo.json (moved aside) / on a fresh one", what,
		fmt.Sprintf("%.2fx", s.med), s, "", nil)
	restoreTodos()
	if err := os.Remove(outbox); err != nil {
		b.Fatal(err)
	}
	restoreOutbox()
}

// BenchmarkChambers compares `wake --now` of one chamber in a user manager that holds 1, 10
// and 100 started chambers (three managers side by side, measured in alternating rounds): the
// manager's work per wake must not grow with what else it holds. Beside it, a daemon-reload in
// each manager: what every wake cost before timers were transient, and how it grows.
func BenchmarkChambers(b *testing.B) {
	quietDisk()
	needBinary(b)
	counts := []int{1, 10, 100}
	if !*full {
		counts = []int{1, 10}
	}
	type mgr struct {
		n   int
		m   *systemdtest.Manager
		env []string
		dir string // the chamber measured
	}
	var ms_ []*mgr
	root := b.TempDir()
	for _, n := range counts {
		m := systemdtest.Start(b)
		g := &mgr{n: n, m: m, env: managerEnv(m)}
		for i := 0; i < n; i++ {
			dir := filepath.Join(root, fmt.Sprintf("m%d", n), fmt.Sprintf("c%03d", i))
			chamber(b, dir, quickAgent, "")
			mustRun(b, g.env, dir, bin, "start", filepath.Join(dir, "plan.md"))
			if i == 0 {
				g.dir = dir
			}
		}
		b.Logf("%d chambers: %d unit files", n, countFiles(b, m.UnitDir))
		ms_ = append(ms_, g)
	}
	// Paired rounds: the managers take turns in every round, a wake in each, then a reload in
	// each; the ratios to one chamber are taken within the round.
	rounds := reps(b, 21)
	var cases []func() time.Duration
	for _, g := range ms_ {
		cases = append(cases, func() time.Duration { return mustRun(b, g.env, g.dir, bin, "wake", "--now", "--dir", g.dir).wall })
	}
	for _, g := range ms_ {
		cases = append(cases, func() time.Duration { t0 := time.Now(); g.m.Systemctl(b, "daemon-reload"); return time.Since(t0) })
	}
	r := pairedRounds(rounds, nil, cases...)
	k := len(ms_)
	for i, g := range ms_ {
		what := fmt.Sprintf("%d chamber(s) in the user manager (%d unit files)", g.n, countFiles(b, g.m.UnitDir))
		if i == 0 {
			record(groupChambers, "`cryochamber wake --now` of one chamber (whole process)", what,
				fmt.Sprintf("%s (n=%d); a daemon-reload in that manager: %s", ms(r.median(0)), rounds, ms(r.median(k))), "", nil)
			continue
		}
		s, rs := r.ratio(i, 0), r.ratio(k+i, k)
		value := fmt.Sprintf("%.2fx of 1 chamber (%s against %s); a daemon-reload: %.2fx of 1 chamber (%s)", s.med, ms(r.median(i)), ms(r.median(0)), rs.med, ms(r.median(k+i)))
		if i == k-1 {
			recordPaired(groupChambers, "`cryochamber wake --now` of one chamber (whole process)", what, value, s, "≤ 1.2x of 1 chamber", ok(s.med <= 1.2))
			continue
		}
		recordPaired(groupChambers, "`cryochamber wake --now` of one chamber (whole process)", what, value, s, "", nil)
	}
	// The dashboard's overview of the largest manager's chambers (web_bench_test.go).
	g := ms_[len(ms_)-1]
	dashboardOverview(b, g.env, g.n, reps(b, 11))
}

// hugeSize is the output of the session whose block status and validate read: 505 MiB with
// -cryo.full, 20 MiB without.
func hugeSize() int64 {
	if *full {
		return 505 << 20
	}
	return 20 << 20
}

// BenchmarkHugeBlock compares `status --json` and `validate --json` on a chamber whose latest
// block is hugeSize() (its agent printed that much) with a chamber whose latest block is a few
// lines, in alternating rounds. Then, on the huge one, what they cost without the record the
// session kept of its block (block.json): a block this program did not close (a recovery) is
// read from the log.
func BenchmarkHugeBlock(b *testing.B) {
	needBinary(b)
	m := systemdtest.Start(b)
	env := managerEnv(m)
	root := b.TempDir()
	data := filepath.Join(root, "output.txt")
	size := hugeSize()
	writeOutput(b, data, size)
	huge := filepath.Join(root, "huge")
	agent := fmt.Sprintf("#!/bin/sh\ncat %s\necho \"[CRYO:EXIT 0] printed %d bytes\"\necho \"[CRYO:WAKE +$((1440 + CRYO_SESSION))m]\"\n", shQuote(data), size)
	chamber(b, huge, agent, "")
	mustRun(b, env, huge, bin, "start", filepath.Join(huge, "plan.md"))
	os.Remove(data)
	small := filepath.Join(root, "small")
	chamber(b, small, quickAgent, "")
	mustRun(b, env, small, bin, "start", filepath.Join(small, "plan.md"))

	argv := func(cmd, dir string) []string { return []string{bin, cmd, "--json", "--dir", dir} }
	// Paired rounds: per command, the huge block and the small one take turns in every round.
	n := reps(b, 11)
	what := fmt.Sprintf("latest block of %d MiB, against one of a few lines", size>>20)
	smallMed := map[string]time.Duration{}
	for _, cmd := range []string{"status", "validate"} {
		one := func(d string) time.Duration {
			p := run(b, env, d, argv(cmd, d)...)
			if cmd == "status" && p.status != 0 || !strings.Contains(p.out, "{") {
				b.Fatalf("%s: exit %d\n%s", cmd, p.status, p.out)
			}
			return p.wall
		}
		r := pairedRounds(n, []string{"huge", "small"}, func() time.Duration { return one(huge) }, func() time.Duration { return one(small) })
		var peak int64
		for i := 0; i < 3; i++ {
			peak = max(peak, runRSS(b, env, huge, argv(cmd, huge)...).maxRSS)
		}
		s := r.ratio(0, 1)
		smallMed[cmd] = r.median(1)
		recordPaired(groupYears, fmt.Sprintf("`cryochamber %s --json` on a huge latest block / on a small one (whole process)", cmd), what,
			fmt.Sprintf("%.2fx (%s against %s); peak RSS %s", s.med, ms(r.median(0)), ms(r.median(1)), mib(peak)),
			s, "≤ 1.5x; RSS < 32 MiB", ok(s.med <= 1.5 && peak < rssTarget))
	}
	// Without the record: what reading the block costs (a recovery, or a log changed since).
	if err := os.Remove(filepath.Join(stateDirOf(m, huge), "block.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.Fatal(err) // (a binary from before block.json has none: these rows then repeat the ones above)
	}
	for _, cmd := range []string{"status", "validate"} {
		var d []time.Duration
		var peak int64
		for i := 0; i < 3; i++ {
			p := runRSS(b, env, huge, argv(cmd, huge)...)
			d = append(d, p.wall)
			peak = max(peak, p.maxRSS)
		}
		record(groupYears, fmt.Sprintf("`cryochamber %s --json` on the huge block without block.json (the block is read)", cmd), what,
			fmt.Sprintf("median %s (n=3), %.0fx the small block; peak RSS %s", ms(median(d)), float64(median(d))/float64(smallMed[cmd]), mib(peak)), "", nil)
	}
}
