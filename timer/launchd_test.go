package timer

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"howett.net/plist"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone %s is not available: %v", name, err)
	}
	return loc
}

func TestLaunchdLabels(t *testing.T) {
	// Literal values: a change renames every installed agent of every user.
	id := ID("/home/alice/plans/garden")
	for _, tt := range []struct{ got, want string }{
		{LaunchdLabel(id, Wake), "dev.cryochamber.cryo-garden-ee66b621.wake"},
		{LaunchdLabel(id, Fallback), "dev.cryochamber.cryo-garden-ee66b621.fallback"},
		{LaunchdInboxLabel(id), "dev.cryochamber.cryo-garden-ee66b621.inbox"},
		{LaunchdPlistName(LaunchdLabel(id, Wake)), "dev.cryochamber.cryo-garden-ee66b621.wake.plist"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestCalendarFor(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	ny := mustZone(t, "America/New_York")
	lordHowe := mustZone(t, "Australia/Lord_Howe")
	amsterdam := mustZone(t, "Europe/Amsterdam")
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		at   string
		loc  *time.Location
		cal  CalendarInterval
		fire string
	}{
		{"whole minute stays", "2026-03-08T09:00:00Z", time.UTC, CalendarInterval{3, 8, 9, 0}, "2026-03-08T09:00:00Z"},
		{"seconds round up", "2026-03-08T09:00:30Z", time.UTC, CalendarInterval{3, 8, 9, 1}, "2026-03-08T09:01:00Z"},
		{"a nanosecond rounds up", "2026-03-08T09:00:00.000000001Z", time.UTC, CalendarInterval{3, 8, 9, 1}, "2026-03-08T09:01:00Z"},
		{"local zone", "2026-03-08T09:00:30Z", berlin, CalendarInterval{3, 8, 10, 1}, "2026-03-08T09:01:00Z"},
		{"new year", "2026-12-31T22:59:30Z", berlin, CalendarInterval{1, 1, 0, 0}, "2026-12-31T23:00:00Z"},
		{"new year UTC", "2026-12-31T23:59:30Z", time.UTC, CalendarInterval{1, 1, 0, 0}, "2027-01-01T00:00:00Z"},
		{"Feb 29", "2028-02-29T11:59:59Z", time.UTC, CalendarInterval{2, 29, 12, 0}, "2028-02-29T12:00:00Z"},
		// 01:59:30 EST, one minute before the gap: 02:00 does not exist, 03:00 EDT follows.
		{"rounds across a DST gap", "2026-03-08T06:59:30Z", ny, CalendarInterval{3, 8, 3, 0}, "2026-03-08T07:00:00Z"},
		{"after a DST gap", "2026-03-08T07:30:00Z", ny, CalendarInterval{3, 8, 3, 30}, "2026-03-08T07:30:00Z"},
		// 01:30 occurs twice on 2026-11-01 in New York: EDT (05:30Z), then EST (06:30Z).
		{"first of a repeated hour stays", "2026-11-01T05:30:00Z", ny, CalendarInterval{11, 1, 1, 30}, "2026-11-01T05:30:00Z"},
		{"second of a repeated hour moves past it", "2026-11-01T06:30:00Z", ny, CalendarInterval{11, 1, 2, 0}, "2026-11-01T07:00:00Z"},
		{"last second of a repeated hour", "2026-11-01T06:59:01Z", ny, CalendarInterval{11, 1, 2, 0}, "2026-11-01T07:00:00Z"},
		// Lord Howe moves by 30 minutes: 01:30 to 02:00 repeats on 2026-04-05 (+11 then +10:30).
		{"half-hour repeat, first", "2026-04-04T14:45:00Z", lordHowe, CalendarInterval{4, 5, 1, 45}, "2026-04-04T14:45:00Z"},
		{"half-hour repeat, second", "2026-04-04T15:15:00Z", lordHowe, CalendarInterval{4, 5, 2, 0}, "2026-04-04T15:30:00Z"},
		// Amsterdam kept UTC+1:19:32 in the summer of 1930: its minutes start 28 seconds into UTC's.
		{"offset with seconds", "1930-06-01T08:00:00Z", amsterdam, CalendarInterval{6, 1, 9, 20}, "1930-06-01T08:00:28Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cal, fire, err := CalendarFor(utc(tt.at), tt.loc)
			if err != nil {
				t.Fatal(err)
			}
			if cal != tt.cal || !fire.Equal(utc(tt.fire)) {
				t.Errorf("CalendarFor(%s, %s) = %v, %s; want %v, %s", tt.at, tt.loc, cal, fire.UTC().Format(time.RFC3339), tt.cal, tt.fire)
			}
			// launchd, as this package models it, fires the calendar at exactly that instant.
			next, ok := NextCalendar(cal, tt.loc, fire.Add(-time.Nanosecond))
			if !ok || !next.Equal(fire) {
				t.Errorf("NextCalendar(%v) = %s, %v; want %s", cal, next.UTC().Format(time.RFC3339), ok, tt.fire)
			}
		})
	}
}

func TestCalendarForRefuses(t *testing.T) {
	if _, _, err := CalendarFor(time.Time{}, time.UTC); err == nil || err.Error() != "no time given" {
		t.Errorf("zero time: %v", err)
	}
	if _, _, err := CalendarFor(time.Now(), nil); err == nil || err.Error() != "no time zone given" {
		t.Errorf("nil zone: %v", err)
	}
}

func TestNextCalendar(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	tokyo := mustZone(t, "Asia/Tokyo")
	tests := []struct {
		name string
		cal  CalendarInterval
		loc  *time.Location
		now  string
		want string // "" for ok=false
	}{
		{"later this year", CalendarInterval{3, 8, 9, 0}, time.UTC, "2026-01-01T00:00:00Z", "2026-03-08T09:00:00Z"},
		{"passed: next year", CalendarInterval{3, 8, 9, 0}, time.UTC, "2026-03-08T09:00:01Z", "2027-03-08T09:00:00Z"},
		{"at the instant: next year", CalendarInterval{3, 8, 9, 0}, time.UTC, "2026-03-08T09:00:00Z", "2027-03-08T09:00:00Z"},
		{"Feb 29 waits for a leap year", CalendarInterval{2, 29, 0, 0}, time.UTC, "2026-06-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"Feb 29 across 2100", CalendarInterval{2, 29, 0, 0}, time.UTC, "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"Feb 30 never", CalendarInterval{2, 30, 0, 0}, time.UTC, "2026-01-01T00:00:00Z", ""},
		{"month 13 never", CalendarInterval{13, 1, 0, 0}, time.UTC, "2026-01-01T00:00:00Z", ""},
		{"minute 60 never", CalendarInterval{1, 1, 0, 60}, time.UTC, "2026-01-01T00:00:00Z", ""},
		// 2026-01-01 05:00 in Tokyo is still 2025 in UTC: the year is the local one.
		{"local new year", CalendarInterval{1, 1, 5, 0}, tokyo, "2025-12-31T19:00:00Z", "2025-12-31T20:00:00Z"},
		{"a gap moves forward", CalendarInterval{3, 8, 2, 30}, ny, "2026-01-01T00:00:00Z", "2026-03-08T07:30:00Z"},
		{"a repeat fires at the first", CalendarInterval{11, 1, 1, 30}, ny, "2026-01-01T00:00:00Z", "2026-11-01T05:30:00Z"},
		{"between the two of a repeat: next year", CalendarInterval{11, 1, 1, 30}, ny, "2026-11-01T06:00:00Z", "2027-11-01T05:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now, err := time.Parse(time.RFC3339, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := NextCalendar(tt.cal, tt.loc, now)
			if tt.want == "" {
				if ok {
					t.Fatalf("NextCalendar(%v) = %s, want none", tt.cal, got)
				}
				return
			}
			want, _ := time.Parse(time.RFC3339, tt.want)
			if !ok || !got.Equal(want) {
				t.Fatalf("NextCalendar(%v, %s) = %s, %v; want %s", tt.cal, tt.now, got.UTC().Format(time.RFC3339), ok, tt.want)
			}
		})
	}
}

// TestCalendarRoundTripYear walks a whole year in several zones: every instant gets a fire time
// no earlier than itself, late by less than a minute except past a repeated hour, and launchd's
// next match of the calendar (as NextCalendar computes it) is that fire time.
func TestCalendarRoundTripYear(t *testing.T) {
	for _, name := range []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Pacific/Chatham"} {
		loc := mustZone(t, name)
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for at := start; at.Before(start.AddDate(1, 0, 0)); at = at.Add(7*time.Minute + 13*time.Second) {
			checkCalendarRoundTrip(t, at, loc)
		}
	}
}

func checkCalendarRoundTrip(t testing.TB, at time.Time, loc *time.Location) {
	t.Helper()
	cal, fire, err := CalendarFor(at, loc)
	if err != nil {
		t.Fatalf("CalendarFor(%s, %s): %v", at, loc, err)
	}
	if fire.Before(at) || fire.Sub(at) > 3*time.Hour {
		t.Fatalf("CalendarFor(%s, %s) fires at %s", at, loc, fire)
	}
	if fire.Sub(at) >= time.Minute && len(wallInstants(at.In(loc).Year(), at.In(loc).Month(), at.In(loc).Day(), at.In(loc).Hour(), at.In(loc).Minute(), loc)) != 2 {
		t.Fatalf("CalendarFor(%s, %s) fires at %s, a minute or more late outside a repeated hour", at, loc, fire)
	}
	next, ok := NextCalendar(cal, loc, at.Add(-time.Nanosecond))
	if !ok || !next.Equal(fire) {
		t.Fatalf("CalendarFor(%s, %s) = %v at %s, but NextCalendar gives %s, %v", at, loc, cal, fire, next, ok)
	}
}

// Golden plists.

// launchdFixtures are the chambers of the golden plists. The awkward one has every character
// XML escapes or a shell would read: spaces, & < > " ', %, $, a backslash and non-ASCII.
func launchdFixtures() []struct {
	name string
	bin  string
	c    Chamber
	at   time.Time
} {
	mk := func(dir, home string) Chamber {
		return Chamber{
			ID: ID(dir), Dir: dir, EnvFile: filepath.Join(dir, ".cryo", "env"),
			Env:    []string{"PATH=/opt/homebrew/bin:/usr/bin:/bin", "HOME=" + home},
			Stdout: filepath.Join(dir, ".cryo", "launchd.out"), Stderr: filepath.Join(dir, ".cryo", "launchd.err"),
		}
	}
	awkward := `/Users/alice/My Plans & <Ideas> "best" 'ever' 100% $HOME \ é ✓ 日本`
	return []struct {
		name string
		bin  string
		c    Chamber
		at   time.Time
	}{
		{"plain", "/usr/local/bin/cryochamber", mk("/Users/alice/plans/garden", "/Users/alice"),
			time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)},
		{"awkward", "/Applications/Cryo & <Co>/bin/cryo chamber", mk(awkward, `/Users/a "b" & <c>`),
			time.Date(2026, 12, 31, 22, 59, 30, 0, time.UTC)},
	}
}

// goldenPlists renders every plist of a fixture chamber: file name → content.
func goldenPlists(t *testing.T, bin string, c Chamber, at time.Time) map[string][]byte {
	t.Helper()
	loc := mustZone(t, "Europe/Berlin")
	out := map[string][]byte{}
	for i, k := range Kinds {
		j := Job{Kind: k, At: at.Add(time.Duration(i) * time.Hour), Argv: []string{bin, string(k), "--dir", c.Dir}}
		data, err := LaunchdPlist(c, j, loc)
		if err != nil {
			t.Fatal(err)
		}
		out[LaunchdPlistName(LaunchdLabel(c.ID, k))] = data
	}
	data, err := LaunchdWatchPlist(c, filepath.Join(c.Dir, "messages", "inbox"), []string{bin, "wake", "--dir", c.Dir})
	if err != nil {
		t.Fatal(err)
	}
	out[LaunchdPlistName(LaunchdInboxLabel(c.ID))] = data
	return out
}

func TestLaunchdPlistGolden(t *testing.T) {
	for _, g := range launchdFixtures() {
		t.Run(g.name, func(t *testing.T) {
			plists := goldenPlists(t, g.bin, g.c, g.at)
			dir := filepath.Join("testdata", "launchd", g.name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, data := range plists {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("%v (run with -update to create the golden files)", err)
			}
			if len(ents) != len(plists) {
				t.Errorf("%s holds %d files, the fixture renders %d plists", dir, len(ents), len(plists))
			}
			for name, data := range plists {
				want, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Errorf("%v (run with -update)", err)
					continue
				}
				if !bytes.Equal(data, want) {
					t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, data, want)
				}
			}
		})
	}
}

// TestLaunchdPlistContent decodes the golden plists and checks every value the chamber gave
// comes back unchanged (XML specials included), and the keys launchd acts on.
func TestLaunchdPlistContent(t *testing.T) {
	for _, g := range launchdFixtures() {
		t.Run(g.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "launchd", g.name)
			for _, job := range []string{"wake", "fallback", "inbox"} {
				label := LabelPrefix + g.c.ID + "." + job
				data, err := os.ReadFile(filepath.Join(dir, LaunchdPlistName(label)))
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if _, err := plist.Unmarshal(data, &m); err != nil {
					t.Fatal(err)
				}
				cmd := job
				if job == "inbox" {
					cmd = "wake"
				}
				want := map[string]any{
					"Label":               label,
					"ProgramArguments":    []any{g.bin, cmd, "--dir", g.c.Dir},
					"WorkingDirectory":    g.c.Dir,
					"StandardOutPath":     g.c.Stdout,
					"StandardErrorPath":   g.c.Stderr,
					"ProcessType":         "Standard",
					"AbandonProcessGroup": false,
					"EnvironmentVariables": map[string]any{
						"PATH": strings.TrimPrefix(g.c.Env[0], "PATH="),
						"HOME": strings.TrimPrefix(g.c.Env[1], "HOME="),
					},
				}
				switch job {
				case "inbox":
					want["WatchPaths"] = []any{filepath.Join(g.c.Dir, "messages", "inbox")}
					want["RunAtLoad"] = false
				case "fallback":
					// The dead-man holds no time: the same bytes for every wake.
					want["RunAtLoad"] = true
					want["StartInterval"] = uint64(600)
				default:
					want["RunAtLoad"] = true
					at := g.at.Add(time.Duration(slices.Index(Kinds, Kind(job))) * time.Hour) // as goldenPlists arms it
					cal, _, err := CalendarFor(at, mustZone(t, "Europe/Berlin"))
					if err != nil {
						t.Fatal(err)
					}
					want["StartCalendarInterval"] = map[string]any{
						"Month": uint64(cal.Month), "Day": uint64(cal.Day), "Hour": uint64(cal.Hour), "Minute": uint64(cal.Minute),
					}
				}
				if !reflect.DeepEqual(m, want) {
					t.Errorf("%s decodes to\n%#v\nwant\n%#v", job, m, want)
				}
			}
		})
	}
}

// TestLaunchdPlistAwkwardCalendar pins the awkward fixture's time: 22:59:30 UTC on Dec 31 is
// 23:59:30 in Berlin, which rounds up into the next year.
func TestLaunchdPlistAwkwardCalendar(t *testing.T) {
	g := launchdFixtures()[1]
	data := goldenPlists(t, g.bin, g.c, g.at)[LaunchdPlistName(LaunchdLabel(g.c.ID, Wake))]
	a, err := decodeAgent(data)
	if err != nil {
		t.Fatal(err)
	}
	if a.StartCalendarInterval == nil || *a.StartCalendarInterval != (CalendarInterval{1, 1, 0, 0}) {
		t.Errorf("StartCalendarInterval = %v, want 01-01 00:00", a.StartCalendarInterval)
	}
}

// TestLaunchdPlistutil proves every golden plist well formed with libplist: XML → binary →
// XML, and the decoded structure is the same at every step.
func TestLaunchdPlistutil(t *testing.T) {
	bin := e2e.LookPath(t, "plistutil", "libplist-utils")
	files, err := filepath.Glob(filepath.Join("testdata", "launchd", "*", "*.plist"))
	if err != nil || len(files) != 8 {
		t.Fatalf("golden plists: %d files, %v", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			tmp := t.TempDir()
			binPath, xmlPath := filepath.Join(tmp, "x.bin"), filepath.Join(tmp, "x.xml")
			for _, args := range [][]string{{"-i", f, "-o", binPath, "-f", "bin"}, {"-i", binPath, "-o", xmlPath, "-f", "xml"}} {
				if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					t.Fatalf("plistutil %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			binData, err := os.ReadFile(binPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(binData, []byte("bplist00")) {
				t.Fatalf("plistutil did not write a binary plist: %.20q", binData)
			}
			var orig, viaBin, viaXML map[string]any
			for _, d := range []struct {
				path string
				into *map[string]any
			}{{f, &orig}, {binPath, &viaBin}, {xmlPath, &viaXML}} {
				data, err := os.ReadFile(d.path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := plist.Unmarshal(data, d.into); err != nil {
					t.Fatalf("decode %s: %v", d.path, err)
				}
			}
			if !reflect.DeepEqual(orig, viaBin) || !reflect.DeepEqual(orig, viaXML) {
				t.Errorf("plistutil changed the plist:\norig %#v\nbin  %#v\nxml  %#v", orig, viaBin, viaXML)
			}
		})
	}
}

func TestLaunchdPlistRefuses(t *testing.T) {
	g := launchdFixtures()[0]
	ok := Job{Kind: Wake, At: g.at, Argv: []string{g.bin, "wake", "--dir", g.c.Dir}}
	with := func(f func(c *Chamber)) Chamber {
		c := g.c
		c.Env = slices.Clone(c.Env)
		f(&c)
		return c
	}
	argv := func(a ...string) Job { j := ok; j.Argv = a; return j }
	tests := []struct {
		name string
		c    Chamber
		j    Job
		loc  *time.Location
		want string
	}{
		{"kind", g.c, Job{Kind: "daily", At: g.at, Argv: ok.Argv}, time.UTC, `unknown timer kind "daily"`},
		{"no time", g.c, Job{Kind: Wake, Argv: ok.Argv}, time.UTC, "wake agent: no time given"},
		{"no zone", g.c, ok, nil, "wake agent: no time zone given"},
		{"id", with(func(c *Chamber) { c.ID = "cryo-A/b" }), ok, time.UTC, `invalid chamber id "cryo-A/b"`},
		{"no argv", g.c, argv(), time.UTC, "wake agent: empty command line"},
		{"relative executable", g.c, argv("cryochamber", "wake"), time.UTC, `executable "cryochamber" is not absolute`},
		{"argv newline", g.c, argv(g.bin, "a\nb"), time.UTC, "argument 1: argument \"a\\nb\" contains a line break"},
		{"argv NUL", g.c, argv(g.bin, "a\x00b"), time.UTC, "contains the control character U+0000"},
		{"argv tab", g.c, argv(g.bin, "a\tb"), time.UTC, "contains the control character U+0009"},
		{"argv invalid UTF-8", g.c, argv(g.bin, "a\xffb"), time.UTC, "is not valid UTF-8"},
		{"argv U+FFFE", g.c, argv(g.bin, "a\uFFFEb"), time.UTC, "contains U+FFFE at byte 1, which XML cannot carry"},
		{"argv C1", g.c, argv(g.bin, "a\u0085b"), time.UTC, "control character U+0085"},
		{"argv too long", g.c, argv(g.bin, strings.Repeat("x", maxArgv)), time.UTC, "more than the limit"},
		{"relative dir", with(func(c *Chamber) { c.Dir = "plans/garden" }), ok, time.UTC, `chamber directory "plans/garden" is not absolute`},
		{"unclean dir", with(func(c *Chamber) { c.Dir = "/Users/a/../b" }), ok, time.UTC, `is not clean (want "/Users/b")`},
		{"dir newline", with(func(c *Chamber) { c.Dir = "/Users/a\nb" }), ok, time.UTC, "contains a line break"},
		{"long dir", with(func(c *Chamber) { c.Dir = "/" + strings.Repeat("d", maxMacPath) }), ok, time.UTC, "longer than 1023 bytes (PATH_MAX on macOS)"},
		{"no stdout", with(func(c *Chamber) { c.Stdout = "" }), ok, time.UTC, "no stdout path given"},
		{"relative stderr", with(func(c *Chamber) { c.Stderr = "err.log" }), ok, time.UTC, `stderr path "err.log" is not absolute`},
		{"secret in env", with(func(c *Chamber) { c.Env = append(c.Env, "OPENAI_API_KEY=sk") }), ok, time.UTC, "environment variable OPENAI_API_KEY: only PATH, HOME and XDG_STATE_HOME"},
		{"env not NAME=value", with(func(c *Chamber) { c.Env = []string{"PATH"} }), ok, time.UTC, `environment entry "PATH" is not NAME=value`},
		{"env twice", with(func(c *Chamber) { c.Env = append(c.Env, "PATH=/bin") }), ok, time.UTC, "environment variable PATH given twice"},
		{"env newline", with(func(c *Chamber) { c.Env = []string{"HOME=/a\nb"} }), ok, time.UTC, "value of HOME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LaunchdPlist(tt.c, tt.j, tt.loc)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LaunchdPlist error = %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := LaunchdWatchPlist(g.c, "inbox", ok.Argv); err == nil || !strings.Contains(err.Error(), `inbox watcher: inbox directory "inbox" is not absolute`) {
		t.Errorf("LaunchdWatchPlist with a relative dir: %v", err)
	}
	if _, err := LaunchdWatchPlist(g.c, "/x", []string{"wake"}); err == nil || !strings.Contains(err.Error(), `inbox watcher: executable "wake" is not absolute`) {
		t.Errorf("LaunchdWatchPlist with a relative executable: %v", err)
	}
}

func TestLaunchdPlistNoEnvironment(t *testing.T) {
	g := launchdFixtures()[0]
	c := g.c
	c.Env = nil
	data, err := LaunchdPlist(c, Job{Kind: Wake, At: g.at, Argv: []string{g.bin, "wake"}}, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("EnvironmentVariables")) {
		t.Errorf("a chamber without Env got EnvironmentVariables:\n%s", data)
	}
}

// A chamber started with XDG_STATE_HOME set keeps it in its plists: its jobs must find the
// private state it was started with (issue 24). Before, the variable was refused, and start on
// launchd failed at step 4 for every chamber started so.
func TestLaunchdPlistKeepsStateHome(t *testing.T) {
	g := launchdFixtures()[0]
	c := g.c
	c.Env = append(c.Env, "XDG_STATE_HOME=/Users/me/state")
	data, err := LaunchdPlist(c, Job{Kind: Wake, At: g.at, Argv: []string{g.bin, "wake"}}, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("<key>XDG_STATE_HOME</key>")) || !bytes.Contains(data, []byte("<string>/Users/me/state</string>")) {
		t.Errorf("XDG_STATE_HOME is not in the plist:\n%s", data)
	}
}

// Reading `launchctl print`.

// printFixture is a job description in the layout launchctl prints on macOS 26 (one tab per
// level), with a running job, a calendar trigger, and arguments that look like the lines the
// reader looks for.
const printFixture = "gui/501/dev.cryochamber.cryo-x-00000000.wake = {\n" +
	"\tactive count = 1\n" +
	"\tpath = /Users/me/Library/LaunchAgents/dev.cryochamber.cryo-x-00000000.wake.plist\n" +
	"\ttype = LaunchAgent\n" +
	"\tstate = running\n" +
	"\n" +
	"\tprogram = /usr/local/bin/cryochamber\n" +
	"\targuments = {\n" +
	"\t\t/usr/local/bin/cryochamber\n" +
	"\t\twake\n" +
	"\t\t--dir\n" +
	"\t\t/Users/me/state = waiting\n" +
	"\t\tevent triggers = {\n" +
	"\t\t}\n" +
	"\t\tpid = x\n" +
	"\t}\n" +
	"\n" +
	"\tworking directory = /Users/me/event triggers = {\n" +
	"\n" +
	"\tenvironment = {\n" +
	"\t\tPATH => /usr/bin:/bin\n" +
	"\t\tXPC_SERVICE_NAME => dev.cryochamber.cryo-x-00000000.wake\n" +
	"\t}\n" +
	"\n" +
	"\tdomain = gui/501 [100003]\n" +
	"\truns = 2\n" +
	"\tpid = 4242\n" +
	"\tlast exit code = (never exited)\n" +
	"\n" +
	"\tevent triggers = {\n" +
	"\t\tdev.cryochamber.cryo-x-00000000.wake.268435472 => {\n" +
	"\t\t\tkeepalive = 0\n" +
	"\t\t\tservice = dev.cryochamber.cryo-x-00000000.wake\n" +
	"\t\t\tstream = com.apple.launchd.calendarinterval\n" +
	"\t\t\tmonitor = com.apple.UserEventAgent-Aqua\n" +
	"\t\t\tdescriptor = {\n" +
	"\t\t\t\t\"Minute\" => 20\n" +
	"\t\t\t\t\"Hour\" => 3\n" +
	"\t\t\t\t\"Day\" => 29\n" +
	"\t\t\t\t\"Month\" => 2\n" +
	"\t\t\t}\n" +
	"\t\t}\n" +
	"\t\tcom.apple.launchd.WatchPaths => {\n" +
	"\t\t\tstream = com.apple.fsevents.matching\n" +
	"\t\t\tdescriptor = {\n" +
	"\t\t\t\t\"WatchPaths\" => [\n" +
	"\t\t\t\t\t0 = \"/Users/me/inbox\"\n" +
	"\t\t\t\t]\n" +
	"\t\t\t}\n" +
	"\t\t}\n" +
	"\t}\n" +
	"\n" +
	"\tevent channels = {\n" +
	"\t\t\"com.apple.launchd.calendarinterval\" = {\n" +
	"\t\t\tport = 0x92a03\n" +
	"\t\t\tactive = 0\n" +
	"\t\t}\n" +
	"\t}\n" +
	"\n" +
	"\tproperties = runatload | inferred program\n" +
	"}\n"

func TestParseLaunchctlPrint(t *testing.T) {
	j, err := parseLaunchctlPrint([]byte(printFixture))
	if err != nil {
		t.Fatal(err)
	}
	want := &launchctlJob{
		Target:    "gui/501/dev.cryochamber.cryo-x-00000000.wake",
		State:     "running",
		PID:       4242,
		Calendars: []CalendarInterval{{Month: 2, Day: 29, Hour: 3, Minute: 20}},
	}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("got %+v\nwant %+v", j, want)
	}
	if !j.Running() {
		t.Error("Running() = false for a running job")
	}
	// Unquoted descriptor keys (older releases) read the same.
	j, err = parseLaunchctlPrint([]byte(strings.ReplaceAll(printFixture, `"Minute"`, "Minute")))
	if err != nil || len(j.Calendars) != 1 || j.Calendars[0].Minute != 20 {
		t.Errorf("unquoted keys: %+v, %v", j, err)
	}
	// An idle job: no pid, not running, no triggers.
	idle := "gui/501/x = {\n\tstate = not running\n\truns = 0\n}\n"
	j, err = parseLaunchctlPrint([]byte(idle))
	if err != nil || j.Running() || j.PID != 0 || len(j.Calendars) != 0 {
		t.Errorf("idle job: %+v, %v", j, err)
	}
}

func TestParseLaunchctlPrintRefuses(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(printFixture, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(printFixture, old, new, 1)
	}
	tests := []struct {
		name string
		out  string
		want string
	}{
		{"empty", "", "line 0: no job description"},
		{"error text", "Bad request.\nCould not find service \"x\" in domain for user gui: 501\n", "line 1: want a header"},
		{"unterminated", strings.TrimSuffix(printFixture, "}\n"), "the job description ends before its closing brace"},
		{"text after", printFixture + "more\n", "line 62: text after the end of the job"},
		{"unindented", replace("\truns = 2\n", "runs = 2\n"), "line 26: unindented line"},
		{"invalid UTF-8", replace("\ttype = LaunchAgent", "\ttype = \xff"), "line 4: not valid UTF-8"},
		{"bad pid", replace("\tpid = 4242", "\tpid = -1"), `line 27: pid "-1" is not a process id`},
		{"no minute", replace("\t\t\t\t\"Minute\" => 20\n", ""), "line 36: calendar trigger has no Minute"},
		{"weekday", replace("\t\t\t\t\"Minute\" => 20\n", "\t\t\t\t\"Minute\" => 20\n\t\t\t\t\"Weekday\" => 1\n"), "calendar trigger has a Weekday field"},
		{"not a number", replace(`"Hour" => 3`, `"Hour" => three`), "line 38: calendar field Hour is not a number"},
		{"out of range", replace(`"Hour" => 3`, `"Hour" => 24`), "line 36: calendar trigger: hour 24 out of range"},
		{"no such day", replace(`"Day" => 29`, `"Day" => 30`), "calendar trigger: day 30 does not exist in month 2"},
		{"twice", replace("\t\t\t\t\"Hour\" => 3\n", "\t\t\t\t\"Hour\" => 3\n\t\t\t\t\"Hour\" => 4\n"), "line 39: descriptor field Hour given twice"},
		{"no descriptor", replace("\t\t\tdescriptor = {\n\t\t\t\t\"Minute\" => 20\n\t\t\t\t\"Hour\" => 3\n\t\t\t\t\"Day\" => 29\n\t\t\t\t\"Month\" => 2\n\t\t\t}\n", ""), "line 31: calendar trigger without a descriptor"},
		{"too large", strings.Repeat("x", maxPrintOutput+1), "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseLaunchctlPrint([]byte(tt.out))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
			var pe *ParseError
			if tt.name != "too large" && !errors.As(err, &pe) {
				t.Errorf("error %v is not a *ParseError", err)
			}
		})
	}
}

// Fuzz targets.

// FuzzLaunchdPlistRoundTrip: any string used as an argument and inside the chamber path is
// either refused (only for a reason it names: invalid UTF-8, a control character, a
// non-character) or comes back out of the plist exactly.
func FuzzLaunchdPlistRoundTrip(f *testing.F) {
	for _, s := range []string{"plain", "a & b", "<x>", `"q" 'q'`, "100%", "$HOME", `\`, "é ✓ 日本", "]]>", "&amp;",
		"a\nb", "\x00", "\xff", "\uFFFE", "\u0085", "", " lead", "trail "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dir := "/Users/fuzz/" + strings.ReplaceAll(s, "/", "_")
		c := Chamber{ID: ID(dir), Dir: filepath.Clean(dir), Stdout: "/tmp/o", Stderr: "/tmp/e", Env: []string{"HOME=" + s}}
		argv := []string{"/usr/local/bin/cryochamber", s, "--dir", c.Dir}
		data, err := LaunchdPlist(c, Job{Kind: Wake, At: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), Argv: argv}, time.UTC)
		if err != nil {
			if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) && !strings.ContainsAny(s, "\uFFFE\uFFFF") &&
				len(c.Dir) <= maxMacPath {
				t.Fatalf("LaunchdPlist refused %q: %v", s, err)
			}
			return
		}
		a, err := decodeAgent(data)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, data)
		}
		if !slices.Equal(a.ProgramArguments, argv) || a.WorkingDirectory != c.Dir || a.EnvironmentVariables["HOME"] != s {
			t.Fatalf("%q came back as %q, %q, %q", s, a.ProgramArguments, a.WorkingDirectory, a.EnvironmentVariables["HOME"])
		}
	})
}

// FuzzParseLaunchctlPrint: any output is either refused with a line number or read into a job
// whose calendars are all valid dates.
func FuzzParseLaunchctlPrint(f *testing.F) {
	f.Add(printFixture)
	f.Add("gui/501/x = {\n\tstate = not running\n}\n")
	f.Add("gui/501/x = {\n\tevent triggers = {\n\t\tx => {\n\t\t\tstream = com.apple.launchd.calendarinterval\n\t\t\tdescriptor = {\n\t\t\t\tMinute => 1\n\t\t\t}\n\t\t}\n\t}\n}\n")
	f.Fuzz(func(t *testing.T, out string) {
		j, err := parseLaunchctlPrint([]byte(out))
		if err != nil {
			var pe *ParseError
			if len(out) <= maxPrintOutput && !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		for _, c := range j.Calendars {
			if err := c.valid(); err != nil {
				t.Fatalf("accepted calendar %v: %v", c, err)
			}
		}
	})
}

// FuzzCalendarFor: for any instant and zone, the fire time is no earlier than the instant and
// is where launchd's next match of the calendar falls.
func FuzzCalendarFor(f *testing.F) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "America/St_Johns", "Asia/Kathmandu", "Europe/Amsterdam"}
	f.Add(int64(1772960430), int64(0), uint8(0))
	f.Add(int64(1793424600), int64(0), uint8(2))
	f.Add(int64(-1249372800), int64(5), uint8(7))
	f.Fuzz(func(t *testing.T, sec, nsec int64, zone uint8) {
		// Years 1900 to 2400: the zone database covers them, and the walk stays bounded.
		if sec < -2208988800 || sec > 13569465600 || nsec < 0 || nsec >= 1e9 {
			return
		}
		loc := mustZone(t, zones[int(zone)%len(zones)])
		checkCalendarRoundTrip(t, time.Unix(sec, nsec), loc)
	})
}
