package timer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer/launchctltest"
	"github.com/cryochamber/cryochamber/timer/launchctltest/plistschema"
)

// propertyZones are the zones the property tests draw from: whole-hour, half-hour and
// 45-minute offsets, both hemispheres' DST, and no DST at all.
var propertyZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Lord_Howe",
	"America/St_Johns", "Asia/Kathmandu", "Pacific/Chatham", "America/Santiago", "Asia/Kolkata"}

// bruteNextMatch is launchd's next fire of cal after `after`, found the slow way: every minute
// boundary in turn until one whose wall clock in loc reads cal, up to limit. It shares no code
// with NextCalendar or CalendarFor (the property zones have whole-minute offsets, so minute
// boundaries are the same in UTC and in loc).
func bruteNextMatch(cal CalendarInterval, loc *time.Location, after, limit time.Time) (time.Time, bool) {
	for m := after.Truncate(time.Minute).Add(time.Minute); !m.After(limit); m = m.Add(time.Minute) {
		w := m.In(loc)
		if int(w.Month()) == cal.Month && w.Day() == cal.Day && w.Hour() == cal.Hour && w.Minute() == cal.Minute {
			return m, true
		}
	}
	return time.Time{}, false
}

// TestLaunchdStepFiveProperty (issue 15, defects 1 and 4): over random WAKE × zone × load
// delay, step 5 (Check) passes exactly when launchd's next match of the calendar it loaded,
// found by brute force from the moment it is read, is the instant the wake was armed for. A
// WAKE whose minute has begun, or a load that comes after the minute, must fail; a calendar
// read in another zone must fail. The wake is armed two ways: at FireAt's time (what the
// chamber does) and, where Arm takes it, at the wake itself (what it did before FireAt).
// Every plist written passes launchd.plist(5)'s schema.
func TestLaunchdStepFiveProperty(t *testing.T) {
	fake := launchctltest.New(t)
	e := newLaunchdEnvWith(t, fake, fake.Env())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(15, 2026))
	cases := 120
	if testing.Short() {
		cases = 40
	}
	var sawYearLate, sawMoved, sawOK int
	for i := range cases {
		zone := propertyZones[rng.IntN(len(propertyZones))]
		setLocaltime(t, e.localtime, zone)
		loc := mustZone(t, zone)
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(2*365*24*time.Hour))) + time.Duration(rng.IntN(1e9)))
		delay := time.Duration(rng.IntN(3)) * time.Second // the load after planning
		if rng.IntN(3) == 0 {
			delay = time.Duration(rng.Int64N(int64(90 * time.Second)))
		}
		// The read-back after the load: quick, or slow (bootstrap retries take seconds).
		readAfter := time.Duration(rng.IntN(1500)) * time.Millisecond
		if rng.IntN(3) == 0 {
			readAfter = time.Duration(rng.IntN(20000)) * time.Millisecond
		}
		var wake time.Time
		switch rng.IntN(5) {
		case 4: // a few seconds after the load, read back slowly
			wake = now.Add(delay + launchdArmGuard + time.Duration(rng.IntN(8000))*time.Millisecond)
			readAfter = 8*time.Second + time.Duration(rng.IntN(60))*time.Second
		case 0: // a round minute that has begun, or is about to
			wake = now.In(loc).Truncate(time.Minute).Add(time.Duration(rng.IntN(3)-1) * time.Minute)
		case 1: // seconds ahead
			wake = now.Add(time.Duration(rng.IntN(120)) * time.Second)
		case 2: // hours ahead, on a whole minute
			wake = now.Add(time.Duration(rng.IntN(72*60)) * time.Minute).Truncate(time.Minute)
		default: // anywhere in the next three days
			wake = now.Add(time.Duration(rng.Int64N(int64(72 * time.Hour))))
		}

		c := e.c
		c.Dir = filepath.Join(filepath.Dir(e.c.Dir), fmt.Sprintf("p%d", i))
		c.ID = ID(c.Dir)
		label := LaunchdLabel(c.ID, Wake)
		for _, how := range []string{"FireAt", "the wake itself"} {
			desc := fmt.Sprintf("case %d (%s): now %s, WAKE %s in %s, load +%s, read +%s",
				i, how, now.Format(time.RFC3339Nano), wake.Format(time.RFC3339Nano), zone, delay, readAfter)
			at := wake
			if how == "FireAt" {
				var err error
				if at, err = FireAt(e.b, wake, now); err != nil {
					t.Fatalf("%s: FireAt: %v", desc, err)
				}
				// Never early, never more than the planning lead plus a minute plus a
				// repeated hour late.
				if at.Before(wake) || at.Sub(maxTime(wake, now.Add(launchdPlanLead))) > time.Minute+3*time.Hour {
					t.Fatalf("%s: FireAt = %s", desc, at)
				}
			}
			_, fire, err := CalendarFor(at, loc)
			if err != nil {
				t.Fatal(err)
			}
			e.now = now.Add(delay)
			err = e.b.Arm(ctx, c, e.job(Wake, at))
			if err != nil {
				// Only a calendar that fires too soon is refused, and then nothing is written.
				if !fire.Before(e.now.Add(launchdArmGuard)) || !strings.Contains(err.Error(), "launchd would next match it a year later") {
					t.Fatalf("%s: Arm: %v", desc, err)
				}
				if fileExists(e.plistPath(label)) || fileExists(e.plistPath(label+altSuffix)) {
					t.Fatalf("%s: a refused Arm left a plist", desc)
				}
				sawMoved++
				continue
			}
			if how == "FireAt" && delay < launchdPlanLead-launchdArmGuard && err != nil {
				t.Fatalf("%s: Arm refused FireAt's time: %v", desc, err)
			}
			for _, l := range []string{label, label + altSuffix} {
				if data, err := os.ReadFile(e.plistPath(l)); err == nil {
					checkSchema(t, l, data)
				}
			}
			e.now = e.now.Add(readAfter)
			v, err := Check(ctx, e.b, c.ID, Wake, fire)
			if err != nil {
				t.Fatalf("%s: Check: %v", desc, err)
			}
			held, _, _ := CalendarFor(fire, loc)
			truth, ok := bruteNextMatch(held, loc, e.now, fire.Add(time.Minute))
			matches := ok && truth.Equal(fire)
			if v.OK != matches {
				t.Fatalf("%s: Check says %v (%s) but launchd's next match is %s (found %v)", desc, v.OK, v, truth, ok)
			}
			if matches {
				sawOK++
			} else {
				sawYearLate++
				// This is what step 5 used to accept: it compared the calendars, not the instants.
				want, _, _ := CalendarFor(wake, loc)
				if got, _, _ := CalendarFor(v.Next, loc); got != held || (how != "FireAt" && want != got) {
					t.Fatalf("%s: not the year-late case: %s", desc, v)
				}
			}
			if err := e.b.Disarm(ctx, c.ID, Wake); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d passed, %d refused at Arm, %d failed at step 5 (next match a year late)", sawOK, sawMoved, sawYearLate)
	if sawOK == 0 || sawMoved == 0 || sawYearLate == 0 {
		t.Errorf("the generator missed a region: %d passed, %d refused, %d year late", sawOK, sawMoved, sawYearLate)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestLaunchdCheckYears: Check compares instants, year included. A calendar whose next match
// is next year fails; a wake more than a year ahead passes at its yearly repeat, said so.
func TestLaunchdCheckYears(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	e.now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	far := time.Date(2027, 6, 1, 8, 0, 0, 0, time.UTC)
	if err := e.b.Arm(ctx, e.c, e.job(Wake, far)); err != nil {
		t.Fatal(err)
	}
	v, err := Check(ctx, e.b, e.c.ID, Wake, far)
	if err != nil || !v.OK || !v.Checkpoint ||
		v.String() != "launchd holds 06-01 10:00 (Europe/Berlin) → next 2026-06-01T08:00Z, a yearly repeat before the wake at 2027-06-01T08:00Z (that run re-arms)" {
		t.Fatalf("a wake 15 months ahead: %q %+v %v", v, v, err)
	}
	// At the checkpoint, the same calendar now means the wake itself.
	e.now = time.Date(2026, 6, 1, 8, 0, 30, 0, time.UTC)
	if v, err := Check(ctx, e.b, e.c.ID, Wake, far); err != nil || !v.OK || v.Checkpoint {
		t.Fatalf("after the checkpoint: %q %v", v, err)
	}
	// A calendar a day off in an earlier year is no checkpoint.
	if v, err := Check(ctx, e.b, e.c.ID, Wake, far.Add(24*time.Hour)); err != nil || v.OK {
		t.Fatalf("a calendar a day off: %q %v", v, err)
	}
}

// TestLaunchdDeadManIsFixed (issue 15, defect 3): the dead-man's plist holds no time. Whatever
// the wake and whatever the zone, a chamber's dead-man is the same bytes: a StartInterval job
// running `fallback`, which shares nothing with the wake's calendar.
func TestLaunchdDeadManIsFixed(t *testing.T) {
	g := launchdFixtures()[0]
	rng := rand.New(rand.NewPCG(3, 15))
	var first []byte
	for i := range 200 {
		loc := mustZone(t, propertyZones[rng.IntN(len(propertyZones))])
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(3 * 365 * 24 * time.Hour))))
		data, err := LaunchdPlist(g.c, Job{Kind: Fallback, At: at, Argv: []string{g.bin, "fallback", "--dir", g.c.Dir}}, loc)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = data
			checkSchema(t, LaunchdLabel(g.c.ID, Fallback), data)
			a, err := decodeAgent(data)
			if err != nil {
				t.Fatal(err)
			}
			if a.StartCalendarInterval != nil || a.StartInterval != int(LaunchdDeadManEvery/time.Second) || !a.RunAtLoad {
				t.Fatalf("the dead-man is not a fixed StartInterval job: %+v", a)
			}
			continue
		}
		if !bytes.Equal(data, first) {
			t.Fatalf("the dead-man for %s in %s differs from the first:\n%s", at, loc, data)
		}
	}
}

// TestLaunchdWrittenOnce (issue 15, defect 2): three sessions arm the wake, the dead-man and
// the inbox watcher. Only the wake changes, so only the wake is written and loaded again; the
// dead-man and the watcher are written and loaded once, at the first session.
func TestLaunchdWrittenOnce(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	inbox := filepath.Join(e.c.Dir, "messages", "inbox")
	wakeArgv := []string{e.bin, "wake", "--dir", e.c.Dir}
	at := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	fb, in := LaunchdLabel(e.c.ID, Fallback), LaunchdInboxLabel(e.c.ID)
	var fbInfo, inInfo os.FileInfo
	for session := 1; session <= 3; session++ {
		wakeAt := at.Add(time.Duration(session) * 24 * time.Hour)
		if err := e.b.Arm(ctx, e.c, e.job(Wake, wakeAt), e.job(Fallback, wakeAt.Add(time.Hour))); err != nil {
			t.Fatalf("session %d: %v", session, err)
		}
		if err := e.b.Watch(ctx, e.c, inbox, wakeArgv); err != nil {
			t.Fatalf("session %d: %v", session, err)
		}
		fi1, err1 := os.Stat(e.plistPath(fb))
		fi2, err2 := os.Stat(e.plistPath(in))
		if err1 != nil || err2 != nil {
			t.Fatalf("session %d: %v %v", session, err1, err2)
		}
		if session == 1 {
			fbInfo, inInfo = fi1, fi2
		} else if !os.SameFile(fi1, fbInfo) || !fi1.ModTime().Equal(fbInfo.ModTime()) || !os.SameFile(fi2, inInfo) || !fi2.ModTime().Equal(inInfo.ModTime()) {
			t.Errorf("session %d rewrote the dead-man or the watcher", session)
		}
		// The next session runs as the wake job that launchd starts at wakeAt.
		cur, _ := e.b.fileSlot(LaunchdLabel(e.c.ID, Wake))
		for _, l := range []string{LaunchdLabel(e.c.ID, Wake), LaunchdLabel(e.c.ID, Wake) + altSuffix} {
			if j, ok := e.fake.Job(e.target(l)); ok && j.Running {
				e.fake.SetRunning(e.target(l), 0)
			}
		}
		e.fake.SetRunning(e.target(cur), 1000+session)
		e.now = wakeAt
	}
	boots := e.fake.Bootstraps()
	wakeBoots := boots[e.target(LaunchdLabel(e.c.ID, Wake))] + boots[e.target(LaunchdLabel(e.c.ID, Wake)+altSuffix)]
	if wakeBoots != 3 || boots[e.target(fb)] != 1 || boots[e.target(in)] != 1 {
		t.Errorf("bootstraps over 3 sessions: wake %d (want 3), dead-man %d (want 1), watcher %d (want 1): %v",
			wakeBoots, boots[e.target(fb)], boots[e.target(in)], boots)
	}
	for _, c := range e.fake.Subcommands() {
		if c == "bootout "+e.target(fb) || c == "bootout "+e.target(in) {
			t.Errorf("the unchanged %s was booted out", strings.TrimPrefix(c, "bootout "))
		}
	}
	if k := e.fake.State().Killed; len(k) != 0 {
		t.Errorf("running jobs were killed: %q", k)
	}
	// Booted out by hand, the dead-man is loaded again from its file, which is not rewritten.
	if err := e.b.bootout(ctx, fb); err != nil {
		t.Fatal(err)
	}
	if err := e.b.Arm(ctx, e.c, e.job(Fallback, at)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(e.plistPath(fb)); err != nil || !os.SameFile(fi, fbInfo) || !fi.ModTime().Equal(fbInfo.ModTime()) {
		t.Errorf("the dead-man was rewritten to be loaded again: %v", err)
	}
	if _, ok := e.fake.Job(e.target(fb)); !ok {
		t.Error("the dead-man was not loaded again")
	}
}

// TestLaunchdBegunMinute (issue 15, defect 4): a WAKE whose minute has begun by the time the
// job is loaded would next match a year later. Arm refuses it, writing nothing; FireAt plans
// the next whole minute instead, which fires within two minutes.
func TestLaunchdBegunMinute(t *testing.T) {
	e := newLaunchdEnv(t)
	ctx := context.Background()
	wake := time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)
	e.now = wake.Add(2 * time.Second) // the session ended at 08:59:58; the load comes at 09:00:02
	err := e.b.Arm(ctx, e.c, e.job(Wake, wake))
	if next, ok, _ := e.b.Next(ctx, e.c.ID, Wake); err == nil && ok && next.Sub(wake) > 2*time.Minute {
		t.Fatalf("armed a wake whose minute had begun: next fire %s, a year after %s", next, wake)
	}
	if err == nil || !strings.Contains(err.Error(), "launchd would next match it a year later") {
		t.Fatalf("Arm = %v", err)
	}
	if fileExists(e.plistPath(LaunchdLabel(e.c.ID, Wake))) {
		t.Error("a refused Arm wrote a plist")
	}
	fire, err := FireAt(e.b, wake, e.now)
	if err != nil || !fire.Equal(wake.Add(time.Minute)) {
		t.Fatalf("FireAt = %s, %v; want 09:01", fire, err)
	}
	if err := e.b.Arm(ctx, e.c, e.job(Wake, fire)); err != nil {
		t.Fatal(err)
	}
	if v, err := Check(ctx, e.b, e.c.ID, Wake, fire); err != nil || !v.OK {
		t.Fatalf("Check = %q, %v", v, err)
	}
}

// checkSchema checks a generated plist against launchd.plist(5): no unknown key, every value of
// the documented type, and the file named after its Label.
func checkSchema(t testing.TB, label string, data []byte) {
	t.Helper()
	unknown, err := plistschema.Check(data)
	if err != nil || len(unknown) != 0 {
		t.Fatalf("%s: launchd.plist(5) schema: %v, unknown keys %q\n%s", label, err, unknown, data)
	}
	a, err := decodeAgent(data)
	if err != nil || a.Label != label {
		t.Fatalf("%s: label %q, %v", label, a.Label, err)
	}
}

// TestLaunchdPlistSchema: every golden plist, and every plist the fuzz corpus of arguments
// yields, passes launchd.plist(5)'s schema.
func TestLaunchdPlistSchema(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "launchd", "*", "*.plist"))
	if err != nil || len(files) == 0 {
		t.Fatalf("golden plists: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkSchema(t, strings.TrimSuffix(filepath.Base(f), ".plist"), data)
	}
	g := launchdFixtures()[1]
	for _, s := range []string{"plain", "a & b", "<x>", `"q" 'q'`, "100%", "$HOME", `\`, "é ✓ 日本", "]]>", "&amp;", " lead"} {
		c := g.c
		c.Dir = "/Users/x/" + s
		c.ID = ID(c.Dir)
		for _, k := range Kinds {
			data, err := LaunchdPlist(c, Job{Kind: k, At: g.at, Argv: []string{g.bin, s, "--dir", c.Dir}}, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			checkSchema(t, LaunchdLabel(c.ID, k), data)
		}
		data, err := LaunchdWatchPlist(c, c.Dir+"/messages/inbox", []string{g.bin, "wake", "--dir", c.Dir})
		if err != nil {
			t.Fatal(err)
		}
		checkSchema(t, LaunchdInboxLabel(c.ID), data)
	}
}

// TestPlistSchemaRefuses proves the schema check can fail: each plist breaks one rule of
// launchd.plist(5).
func TestPlistSchemaRefuses(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "launchd", "plain", "dev.cryochamber.cryo-garden-6228a585.wake.plist"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, old, new, want string }{
		{"bool as string", "<key>RunAtLoad</key>\n\t\t<true/>", "<key>RunAtLoad</key>\n\t\t<string>yes</string>", "RunAtLoad is a string"},
		{"hour out of range", "<key>Hour</key>\n\t\t\t<integer>10</integer>", "<key>Hour</key>\n\t\t\t<integer>24</integer>", "Hour = 24 is outside 0..23"},
		{"calendar field", "<key>Hour</key>", "<key>Hours</key>", "has a Hours field"},
		{"no label", "<key>Label</key>", "<key>Name</key>", "the Label key is missing"},
		{"process type", "<string>Standard</string>", "<string>Turbo</string>", `ProcessType "Turbo"`},
		{"argument type", "<string>wake</string>", "<integer>1</integer>", "ProgramArguments[1] is a uint64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Contains(good, []byte(tt.old)) {
				t.Fatalf("golden file lacks %q", tt.old)
			}
			_, err := plistschema.Check(bytes.Replace(good, []byte(tt.old), []byte(tt.new), 1))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check = %v, want %q", err, tt.want)
			}
		})
	}
	unknown, err := plistschema.Check(bytes.Replace(good, []byte("<key>ProcessType</key>"), []byte("<key>ProcesType</key>"), 1))
	if err != nil || !slices.Equal(unknown, []string{"ProcesType"}) {
		t.Errorf("misspelt key: %q, %v", unknown, err)
	}
}

func TestParsePrintDisabled(t *testing.T) {
	// Layouts from ninehills/blog#85 (legacy) and ggbond268/MacTools#116 (macOS 14 and later).
	legacy := "disabled services = {\n\t\"com.docker.helper\" => false\n\t\"dev.cryochamber.x.wake\" => true\n}\nlogin item associations = {\n\t\"version.com.docker.helper\" => \"64133\"\n}\n"
	modern := "disabled services = {\n\t\"com.docker.helper\" => enabled\n\t\"dev.cryochamber.x.wake\" => disabled\n}\nlogin item associations = {\n}\n"
	for name, out := range map[string]string{"legacy": legacy, "modern": modern} {
		got, err := parsePrintDisabled([]byte(out))
		if err != nil || len(got) != 2 || !got["dev.cryochamber.x.wake"] || got["com.docker.helper"] {
			t.Errorf("%s: %v, %v", name, got, err)
		}
	}
	for _, tt := range []struct{ name, out, want string }{
		{"empty", "", "line 0: no disabled services block"},
		{"unterminated", "disabled services = {\n\t\"a\" => true\n", "line 2: the disabled services block ends before its closing brace"},
		{"odd value", "disabled services = {\n\t\"a\" => maybe\n}\n", `line 2: a is neither enabled nor disabled`},
		{"unquoted", "disabled services = {\n\ta => true\n}\n", "line 2: want `\"label\" => disabled`"},
		{"two blocks", "disabled services = {\n}\ndisabled services = {\n}\n", "line 3: two disabled services blocks"},
		{"bad UTF-8", "disabled services = {\n\t\"\xff\" => true\n}\n", "line 2: not valid UTF-8"},
	} {
		_, err := parsePrintDisabled([]byte(tt.out))
		var pe *ParseError
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &pe) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// FuzzParsePrintDisabled: any output is read or refused with a line number.
func FuzzParsePrintDisabled(f *testing.F) {
	f.Add("disabled services = {\n\t\"a\" => disabled\n}\n")
	f.Add("disabled services = {\n\t\"a\" => true\n}\nlogin item associations = {\n\t\"a\" => \"b\"\n}\n")
	f.Fuzz(func(t *testing.T, out string) {
		if _, err := parsePrintDisabled([]byte(out)); err != nil {
			var pe *ParseError
			if len(out) <= maxPrintOutput && !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
		}
	})
}
