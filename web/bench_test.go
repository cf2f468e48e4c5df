package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/sessionlog"
	"github.com/cryochamber/cryochamber/web"
)

// The dashboard's two heaviest pages, as a browser asks for them (the whole handler: the
// token check, the chamber package's calls over one connection to a private systemd user
// manager, the template), against chambers started by the real binary:
//
//	go test -run '^$' -bench . -benchtime 20x ./web
//
// docs/BENCHMARKS.md records the figures (target: each under 100 ms).

const quickAgent = "#!/bin/sh\necho 'checked'\necho '[CRYO:EXIT 0] checked the feed'\necho '[CRYO:WAKE +1h]'\n"

// BenchmarkOverview100: the overview of 100 armed chambers, at a first visit (every status asked)
// and at a visit within statusTTL of the last one (ps asked, the statuses of unchanged chambers
// remembered), as when the page reloads itself at a session's start or end.
func BenchmarkOverview100(b *testing.B) {
	agents := map[string]string{}
	for i := range 100 {
		agents[fmt.Sprintf("plan-%03d", i)] = quickAgent
	}
	t0 := time.Now()
	f := newFixture(b, agents)
	b.Logf("started 100 chambers in %s", time.Since(t0).Round(time.Millisecond))
	b.Run("first-visit", func(b *testing.B) {
		web.SetStatusTTL(f.srv, 0) // every status asked again
		benchPage(b, f, "/", "plan-099")
	})
	b.Run("again-within-30s", func(b *testing.B) {
		web.SetStatusTTL(f.srv, 30*time.Second) // the default: ps asked again, statuses remembered
		benchPage(b, f, "/", "plan-099")
	})
}

// BenchmarkChamberPage5y: the page of a chamber that has run daily for five years: 1,826
// sessions in its log and its history index, a reply every fourth day and an alert every
// fiftieth in its outbox.
func BenchmarkChamberPage5y(b *testing.B) {
	var sessions, msgs int
	var days []time.Time
	f := newFixture(b, map[string]string{"five-years": quickAgent}, func(name, dir string) {
		days, msgs = genYears(b, dir, 5)
		sessions = len(days)
	})
	genHistory(b, f.cenv.StateDir, f.dirs["five-years"], days)
	b.Logf("%d sessions, %d outbox messages", sessions+1, msgs)
	benchPage(b, f, "/c/"+f.id("five-years"), fmt.Sprintf(`<a href="/c/%s?session=%d&amp;token=`, f.id("five-years"), sessions-48))
}

// benchPage measures GET path and checks that the answer holds want.
func benchPage(b *testing.B, f *fixture, path, want string) {
	b.Helper()
	get := func() int {
		r, _ := http.NewRequest("GET", f.ts.URL+path, nil)
		r.Header.Set(web.TokenHeader, f.token)
		resp, err := f.client.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		body := readAll(b, resp)
		if resp.StatusCode != 200 || !strings.Contains(body, want) {
			b.Fatalf("GET %s: %d, without %q:\n%.2000s", path, resp.StatusCode, want, body)
		}
		return len(body)
	}
	size := get() // and warm the page cache, as a second visit finds it
	// The CPU this process spends per page (the server and the client of the benchmark): what
	// the wall time would be on an idle single CPU, whatever else the shared machine runs.
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		get()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(size)/1024, "KiB/page")
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// genYears writes years of daily sessions into dir's log with the log's own writer, and the
// outbox those sessions would have left, before the chamber is started.
func genYears(tb testing.TB, dir string, years int) (days []time.Time, msgs int) {
	tb.Helper()
	logPath := filepath.Join(dir, "cryo.log")
	cdir, err := confined.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer cdir.Close()
	first := time.Now().UTC().AddDate(-years, 0, 0).Truncate(24 * time.Hour).Add(9 * time.Hour)
	for day := first; day.Before(time.Now().Add(-24 * time.Hour)); day = day.Add(24 * time.Hour) {
		days = append(days, day)
		n := len(days)
		blk, err := sessionlog.Begin(logPath, n, day, []string{"task: daily check of the release feed", "command: ./agent.sh", "due: " + day.Format(time.RFC3339) + " (plan)"})
		if err != nil {
			tb.Fatal(err)
		}
		out := blk.Stdout()
		for i := range 30 {
			fmt.Fprintf(out, "step %d of session %d: fetched the feed, compared 42 entries, nothing new for v1.%d\n", i, n, n%40)
		}
		fmt.Fprintf(blk.Stderr(), "warning: the feed answered slowly (%d ms)\n", 300+n%700)
		fmt.Fprintf(out, "[CRYO:PLAN check again tomorrow]\n[CRYO:EXIT 0] day %d: nothing new\n[CRYO:WAKE %s]\n", n, day.Add(24*time.Hour).Format("2006-01-02T15:04"))
		if err := blk.End(day.Add(3*time.Minute), 0, ""); err != nil {
			tb.Fatal(err)
		}
		var m *message.Message
		switch {
		case n%50 == 0:
			m = &message.Message{From: "cryochamber", Time: day.Add(time.Hour), Kind: message.KindAlert, Session: n,
				Delivery: "delivered: webhook https://hooks.example/x", Body: fmt.Sprintf("session %d was due at %s and is still running after fallback_after (1h)\n", n, day.Format(time.RFC3339))}
		case n%4 == 0:
			m = &message.Message{From: "agent", Time: day.Add(3 * time.Minute), Kind: message.KindReply, Session: n,
				Subject: fmt.Sprintf("session %d of five-years", n), InReplyTo: []string{day.Format("20060102T150405Z") + "-alice-0000"},
				Body: "Nothing new upstream today. The last release is still v1.39; I will look again tomorrow morning and write if anything changes.\n"}
		}
		if m != nil {
			if _, err := message.Write(cdir, message.OutboxDir, m); err != nil {
				tb.Fatal(err)
			}
			msgs++
		}
	}
	return days, msgs
}

// genHistory writes the history index those sessions would have left (one JSON line each, a
// file per year, in the chamber's private state directory), before the row of the session
// that `start` ran and recorded.
func genHistory(tb testing.TB, stateDir, dir string, days []time.Time) {
	tb.Helper()
	abs, err := chamber.AbsDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	store := filepath.Dir(chamber.StatePath(stateDir, abs))
	byYear := map[int][]byte{}
	for i, day := range days {
		row := chamber.HistoryRow{Session: i + 1, Why: chamber.WhyPlan, Due: day, Started: day.Add(2 * time.Second), Late: "2s",
			Ended: day.Add(3 * time.Minute), Duration: "2m58s", Exit: 0, Outcome: "ok", Summary: fmt.Sprintf("day %d: nothing new", i+1),
			Answered: b2i(i%4 == 3), Replies: b2i(i%4 == 3), NextWake: day.Add(24 * time.Hour).Format(time.RFC3339)}
		line, err := json.Marshal(row)
		if err != nil {
			tb.Fatal(err)
		}
		byYear[day.Year()] = append(append(byYear[day.Year()], line...), '\n')
	}
	for year, data := range byYear {
		path := filepath.Join(store, fmt.Sprintf("history-%d.jsonl", year))
		old, _ := os.ReadFile(path) // the session start ran
		if err := os.WriteFile(path, append(data, old...), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
