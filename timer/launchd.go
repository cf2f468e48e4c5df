package timer

// This file holds the launchd side that needs no Mac: the LaunchAgent plists, their labels, the
// calendar arithmetic of StartCalendarInterval and the reader of `launchctl print`. It has no
// build tags, so Linux tests check every plist (and plistutil round-trips them) even where
// launchd itself never runs.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"howett.net/plist"
)

// LabelPrefix starts every launchd label cryochamber installs. The chamber ID follows it, so
// a chamber's agents are `dev.cryochamber.cryo-garden-ee66b621.wake` and so on: the same ID
// as its systemd units, under a reverse-DNS prefix as launchd expects.
const LabelPrefix = "dev.cryochamber."

// inboxJob is the last label component of the inbox watcher (it is not a timer Kind).
const inboxJob = "inbox"

// altSuffix marks the second slot of a job; see launchdBackend.Arm for why there are two.
const altSuffix = ".alt"

// LaunchdLabel is the label of the LaunchAgent of one timer: `dev.cryochamber.<ID>.<kind>`.
func LaunchdLabel(id string, k Kind) string { return LabelPrefix + id + "." + string(k) }

// LaunchdInboxLabel is the label of the inbox watcher: `dev.cryochamber.<ID>.inbox`.
func LaunchdInboxLabel(id string) string { return LabelPrefix + id + "." + inboxJob }

// LaunchdPlistName is the file name of an agent in ~/Library/LaunchAgents: `<label>.plist`.
func LaunchdPlistName(label string) string { return label + ".plist" }

// maxMacPath is PATH_MAX on macOS (1024) minus the NUL: launchd cannot use a longer path.
const maxMacPath = 1023

// maxArgv bounds the bytes of a job's command line. macOS allows 1 MiB of arguments and
// environment together; a quarter of that is far beyond any real cryochamber command.
const maxArgv = 256 << 10

// maxPlist bounds a plist file this package reads back (Installed).
const maxPlist = 1 << 20

// CalendarInterval is launchd's StartCalendarInterval: a wall-clock minute in the Mac's time
// zone. There is no year and no second: launchd fires at every match, so once a year. `wake`
// compares the real time with timer.json and does nothing on a fire that is not due.
type CalendarInterval struct {
	Month  int `plist:"Month"`
	Day    int `plist:"Day"`
	Hour   int `plist:"Hour"`
	Minute int `plist:"Minute"`
}

func (c CalendarInterval) String() string {
	return fmt.Sprintf("%02d-%02d %02d:%02d", c.Month, c.Day, c.Hour, c.Minute)
}

func (c CalendarInterval) valid() error {
	switch {
	case c.Month < 1 || c.Month > 12:
		return fmt.Errorf("month %d out of range", c.Month)
	case c.Day < 1 || c.Day > 31:
		return fmt.Errorf("day %d out of range", c.Day)
	case c.Hour < 0 || c.Hour > 23:
		return fmt.Errorf("hour %d out of range", c.Hour)
	case c.Minute < 0 || c.Minute > 59:
		return fmt.Errorf("minute %d out of range", c.Minute)
	}
	if c.Day > daysIn(time.Month(c.Month), 2024) { // 2024: a leap year, so Feb 29 passes
		return fmt.Errorf("day %d does not exist in month %d", c.Day, c.Month)
	}
	return nil
}

// launchdAgent is one LaunchAgent plist. howett.net/plist writes the keys sorted, so the file
// is the same for the same job on every build.
type launchdAgent struct {
	Label            string   `plist:"Label"`
	ProgramArguments []string `plist:"ProgramArguments"`
	WorkingDirectory string   `plist:"WorkingDirectory"`
	// EnvironmentVariables holds PATH, HOME and XDG_STATE_HOME only: a plist in ~/Library/LaunchAgents is
	// world-readable, so the agent's other variables stay in the 0600 environment file.
	EnvironmentVariables  map[string]string `plist:"EnvironmentVariables,omitempty"`
	StandardOutPath       string            `plist:"StandardOutPath"`
	StandardErrorPath     string            `plist:"StandardErrorPath"`
	StartCalendarInterval *CalendarInterval `plist:"StartCalendarInterval,omitempty"`
	// StartInterval (seconds) is the dead-man's period: its plist holds no time, so it is
	// written once and never reloaded (see deadManAgent).
	StartInterval int      `plist:"StartInterval,omitempty"`
	WatchPaths    []string `plist:"WatchPaths,omitempty"`
	// RunAtLoad starts the job when it is loaded: at bootstrap and at every login. A calendar
	// event missed while the Mac was off is otherwise never run (launchd only coalesces events
	// missed during sleep), so the timers catch up this way and `wake` ignores a load that is
	// not due.
	RunAtLoad bool `plist:"RunAtLoad"`
	// ProcessType "Standard" is launchd's default, written out so the choice is visible.
	// "Background" would throttle CPU and I/O: an agent that builds code for an hour would run
	// far slower and could hit session_timeout, and the user asked for this work.
	ProcessType string `plist:"ProcessType"`
	// AbandonProcessGroup false (launchd's default, written out): when the job exits, launchd
	// kills what is left of the job's own process group (launchd.plist(5)). That is not the
	// agent's: agent.Exec starts the agent in a process group of its own (so that
	// session_timeout can end all of it), and launchd leaves that group alone. When `wake`
	// dies without ending its agent (kill -9, a crash), the agent runs on as an orphan; the
	// recovery that follows must end it from the process group recorded in the state.
	AbandonProcessGroup bool `plist:"AbandonProcessGroup"`
}

// checkPlistText refuses what a plist must not carry: invalid UTF-8 and control characters
// (checkText, shared with systemd: a newline is legal in a plist string but refused for the
// same values on both backends), and U+FFFE / U+FFFF, which are valid UTF-8 but not XML
// characters: the encoder would silently replace them with U+FFFD.
func checkPlistText(what, s string) error {
	if err := checkText(what, s); err != nil {
		return err
	}
	if i := strings.IndexAny(s, "\uFFFE\uFFFF"); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("%s %q contains %U at byte %d, which XML cannot carry", what, s, r, i)
	}
	return nil
}

// checkPlistPath refuses a path launchd would not use as given: not absolute, not clean (it
// would not name what the caller meant after a move), or longer than macOS's PATH_MAX.
func checkPlistPath(what, p string) error {
	if p == "" {
		return fmt.Errorf("no %s given", what)
	}
	if err := checkPlistText(what, p); err != nil {
		return err
	}
	switch {
	case !filepath.IsAbs(p):
		return fmt.Errorf("%s %q is not absolute", what, p)
	case len(p) > maxMacPath:
		return fmt.Errorf("%s %.40q... is longer than %d bytes (PATH_MAX on macOS)", what, p, maxMacPath)
	}
	if c := filepath.Clean(p); c != p {
		return fmt.Errorf("%s %q is not clean (want %q)", what, p, c)
	}
	return nil
}

// checkArgv refuses a command line launchd cannot run as meant. ProgramArguments are passed
// verbatim (no shell, no quoting), so only the characters themselves matter.
func checkArgv(argv []string) error {
	if len(argv) == 0 {
		return errors.New("empty command line")
	}
	if err := checkPlistPath("executable", argv[0]); err != nil {
		return err
	}
	n := 0
	for i, a := range argv {
		if err := checkPlistText("argument", a); err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
		n += len(a) + 1
	}
	if n > maxArgv {
		return fmt.Errorf("command line is %d bytes, more than the limit of %d", n, maxArgv)
	}
	return nil
}

// plistEnv turns Chamber.Env into EnvironmentVariables. Only PATH, HOME and XDG_STATE_HOME
// (paths, which every job needs to find the program and the private state it was armed with)
// are accepted: the plist is world-readable, and a secret put in Env by mistake must not land
// in it.
func plistEnv(env []string) (map[string]string, error) {
	if len(env) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("environment entry %q is not NAME=value", kv)
		}
		if k != "PATH" && k != "HOME" && k != "XDG_STATE_HOME" {
			return nil, fmt.Errorf("environment variable %s: only PATH, HOME and XDG_STATE_HOME go into a plist (it is world-readable); the others belong in the environment file", k)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("environment variable %s given twice", k)
		}
		if err := checkPlistText("value of "+k, v); err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// newAgent checks what every agent of a chamber shares and fills it in.
func newAgent(c Chamber, label string, argv []string) (*launchdAgent, error) {
	if err := checkID(c.ID); err != nil {
		return nil, err
	}
	if err := checkArgv(argv); err != nil {
		return nil, err
	}
	for _, p := range []struct{ what, path string }{
		{"chamber directory", c.Dir}, {"stdout path", c.Stdout}, {"stderr path", c.Stderr},
	} {
		if err := checkPlistPath(p.what, p.path); err != nil {
			return nil, err
		}
	}
	env, err := plistEnv(c.Env)
	if err != nil {
		return nil, err
	}
	return &launchdAgent{
		Label:                label,
		ProgramArguments:     append([]string(nil), argv...),
		WorkingDirectory:     c.Dir,
		EnvironmentVariables: env,
		StandardOutPath:      c.Stdout,
		StandardErrorPath:    c.Stderr,
		ProcessType:          "Standard",
	}, nil
}

// LaunchdDeadManEvery is the period of the dead-man check on launchd.
//
// The dead-man is not a calendar at WAKE + fallback_after, as the wake is: that would share
// every way the wake's calendar can go wrong (the zone, the missing year, a load that comes
// after its minute) and be rewritten and reloaded with it at every session. It is a
// StartInterval job whose plist never changes, running `cryochamber fallback`, which reads
// the state and alerts when the wake is overdue. An alert comes at most this much after the
// deadline while the Mac is awake.
const LaunchdDeadManEvery = 10 * time.Minute

// timerAgent builds the agent of one timer under the given label: a calendar for the wake, the
// periodic dead-man for the fallback.
func timerAgent(c Chamber, j Job, label string, loc *time.Location) (*launchdAgent, error) {
	if err := checkKind(j.Kind); err != nil {
		return nil, err
	}
	if j.Kind == Fallback {
		return deadManAgent(c, j.Argv, label)
	}
	a, err := newAgent(c, label, j.Argv)
	if err != nil {
		return nil, fmt.Errorf("%s agent: %w", j.Kind, err)
	}
	cal, _, err := CalendarFor(j.At, loc)
	if err != nil {
		return nil, fmt.Errorf("%s agent: %w", j.Kind, err)
	}
	a.StartCalendarInterval = &cal
	a.RunAtLoad = true
	return a, nil
}

// deadManAgent builds the dead-man check: every LaunchdDeadManEvery, and at every load (a
// login after the Mac was off past the deadline), run argv. Nothing in it depends on the
// wake's time, so the same chamber always gets the same bytes.
func deadManAgent(c Chamber, argv []string, label string) (*launchdAgent, error) {
	a, err := newAgent(c, label, argv)
	if err != nil {
		return nil, fmt.Errorf("%s agent: %w", Fallback, err)
	}
	a.StartInterval = int(LaunchdDeadManEvery / time.Second)
	a.RunAtLoad = true
	return a, nil
}

// watchAgent builds the inbox watcher under the given label.
//
// It uses WatchPaths, not QueueDirectories: the archive lives inside the inbox
// (messages/inbox/archive/), so the inbox is never empty, and launchd keeps relaunching a
// QueueDirectories job for as long as its directory is not empty. WatchPaths fires on a change
// instead. launchd matches WatchPaths through FSEvents by path prefix, so a change anywhere
// under the inbox (a claim moving messages into archive/ included) also fires it; that extra
// wake finds nothing due, or the lock held, and exits. RunAtLoad stays false, as systemd's
// PathChanged= does not fire at start: the wake agent's own RunAtLoad already runs `wake` at
// every login.
func watchAgent(c Chamber, dir string, wakeArgv []string, label string) (*launchdAgent, error) {
	a, err := newAgent(c, label, wakeArgv)
	if err != nil {
		return nil, fmt.Errorf("inbox watcher: %w", err)
	}
	if err := checkPlistPath("inbox directory", dir); err != nil {
		return nil, fmt.Errorf("inbox watcher: %w", err)
	}
	a.WatchPaths = []string{dir}
	return a, nil
}

// encode renders an agent as an XML plist with a final newline.
func (a *launchdAgent) encode() ([]byte, error) {
	data, err := plist.MarshalIndent(a, plist.XMLFormat, "\t")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", a.Label, err)
	}
	return append(data, '\n'), nil
}

// decodeAgent reads a plist written by encode (or edited by hand into the same shape).
func decodeAgent(data []byte) (*launchdAgent, error) {
	if len(data) > maxPlist {
		return nil, fmt.Errorf("plist is larger than %d bytes", maxPlist)
	}
	var a launchdAgent
	if _, err := plist.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("decode plist: %w", err)
	}
	return &a, nil
}

// LaunchdPlist builds the LaunchAgent of one job: for the wake, at j.At (rounded up to the
// minute, in loc, the Mac's time zone) and at every load; for the fallback, the periodic
// dead-man check (j.At is not in it). Either runs j.Argv in the chamber directory with PATH
// and HOME from c.Env and the output in c.Stdout and c.Stderr.
func LaunchdPlist(c Chamber, j Job, loc *time.Location) ([]byte, error) {
	a, err := timerAgent(c, j, LaunchdLabel(c.ID, j.Kind), loc)
	if err != nil {
		return nil, err
	}
	return a.encode()
}

// LaunchdWatchPlist builds the inbox watcher: when something changes under dir, run wakeArgv.
func LaunchdWatchPlist(c Chamber, dir string, wakeArgv []string) ([]byte, error) {
	a, err := watchAgent(c, dir, wakeArgv, LaunchdInboxLabel(c.ID))
	if err != nil {
		return nil, err
	}
	return a.encode()
}

// Calendar arithmetic.
//
// launchd matches StartCalendarInterval against the Mac's wall clock. Two cases have no answer
// in its documentation, and this package assumes the one that can only make a wake late,
// never early (an early fire is ignored by `wake`, and the next match is a year later):
//   - a wall-clock minute that occurs twice (the hour repeated when DST ends) fires at the
//     earlier instant, so CalendarFor never asks for the later one: it moves it to the first
//     minute after the repeated period;
//   - a wall-clock minute that does not occur (the hour skipped when DST starts) fires at the
//     same wall time read with the offset before the gap, i.e. moved forward by the gap. The
//     builder never writes one (every rounded instant has a wall time); it can only happen when
//     the zone's rules change after arming.

// CalendarFor returns the StartCalendarInterval that fires at t in loc, and the instant it
// fires: t rounded up to the whole minute (09:00:30 → 09:01, 09:00:00 stays), then, if that
// wall-clock minute occurs twice and t is its second occurrence, moved past the repeated
// period.
func CalendarFor(t time.Time, loc *time.Location) (CalendarInterval, time.Time, error) {
	switch {
	case t.IsZero():
		return CalendarInterval{}, time.Time{}, errors.New("no time given")
	case loc == nil:
		return CalendarInterval{}, time.Time{}, errors.New("no time zone given")
	}
	l := t.In(loc)
	// Round on the local wall clock, in absolute time: a zone whose offset has seconds
	// (local mean time) has its minutes elsewhere than UTC's.
	fire := t.Add(-time.Duration(l.Second())*time.Second - time.Duration(l.Nanosecond()))
	if !fire.Equal(t) {
		fire = fire.Add(time.Minute)
	}
	// A repeated period lasts at most a few hours; 48 hours bounds the walk whatever the zone.
	for i := 0; ; i++ {
		if i > 48*60 {
			return CalendarInterval{}, time.Time{}, fmt.Errorf("time %s: no unambiguous minute within 48 hours in %s", t.Format(time.RFC3339), loc)
		}
		w := fire.In(loc)
		at := wallInstants(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), loc)
		if len(at) > 0 && at[0].Equal(fire) {
			break
		}
		fire = fire.Add(time.Minute)
	}
	w := fire.In(loc)
	return CalendarInterval{Month: int(w.Month()), Day: w.Day(), Hour: w.Hour(), Minute: w.Minute()}, fire, nil
}

// NextCalendar returns the first instant after now at which launchd fires c in loc (see the
// assumptions above). ok is false when c is not a valid date (February 30) or names a day that
// does not occur in the next nine years (February 29 recurs within eight).
func NextCalendar(c CalendarInterval, loc *time.Location, now time.Time) (time.Time, bool) {
	if loc == nil || c.valid() != nil {
		return time.Time{}, false
	}
	y := now.In(loc).Year()
	for year := y - 1; year <= y+9; year++ { // from y-1: now may be Jan 1 here and Dec 31 in UTC
		if c.Day > daysIn(time.Month(c.Month), year) {
			continue
		}
		t := wallFire(year, time.Month(c.Month), c.Day, c.Hour, c.Minute, loc)
		if t.After(now) {
			return t, true
		}
	}
	return time.Time{}, false
}

// wallFire is the instant launchd fires at a wall-clock minute: the earlier of two, or for a
// minute skipped by a gap, the wall time read with the offset before the gap.
func wallFire(y int, mo time.Month, d, h, mi int, loc *time.Location) time.Time {
	if at := wallInstants(y, mo, d, h, mi, loc); len(at) > 0 {
		return at[0]
	}
	w := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	var fire time.Time
	for _, off := range nearbyOffsets(w, loc) {
		// With offsets a < b around a gap, w-a is later than w-b: the latest candidate reads
		// the wall time with the offset before the gap.
		if c := w.Add(-time.Duration(off) * time.Second); c.After(fire) {
			fire = c
		}
	}
	return fire
}

// wallInstants returns the instants whose wall clock in loc reads that minute, earliest first:
// none in a gap, two in a repeated hour. (time.Date picks one of two without saying which.)
func wallInstants(y int, mo time.Month, d, h, mi int, loc *time.Location) []time.Time {
	w := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	var out []time.Time
	for _, off := range nearbyOffsets(w, loc) {
		c := w.Add(-time.Duration(off) * time.Second)
		l := c.In(loc)
		if l.Year() == y && l.Month() == mo && l.Day() == d && l.Hour() == h && l.Minute() == mi && l.Second() == 0 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// nearbyOffsets lists the distinct UTC offsets loc uses within two days of the wall time w
// (read as UTC): every offset that could map some instant to w.
func nearbyOffsets(w time.Time, loc *time.Location) []int {
	var offs []int
	for h := -48; h <= 48; h += 3 {
		_, off := w.Add(time.Duration(h) * time.Hour).In(loc).Zone()
		dup := false
		for _, o := range offs {
			dup = dup || o == off
		}
		if !dup {
			offs = append(offs, off)
		}
	}
	return offs
}

func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// Reading `launchctl print`.
//
// `launchctl print gui/<uid>/<label>` describes a loaded job as nested blocks, one tab of
// indentation per level (as captured on macOS 15 and 26.6.2):
//
//	gui/501/<label> = {
//		active count = 0
//		path = /Users/me/Library/LaunchAgents/<label>.plist
//		type = LaunchAgent
//		state = not running
//		...
//		runs = 0
//		last exit code = (never exited)
//
//		event triggers = {
//			<label>.268435472 => {
//				keepalive = 0
//				service = <label>
//				stream = com.apple.launchd.calendarinterval
//				monitor = com.apple.UserEventAgent-Aqua
//				descriptor = {
//					"Minute" => 20
//					"Hour" => 3
//				}
//			}
//		}
//		...
//	}
//
// A running job also has `pid = N`. The reader trusts the indentation, not the braces: an
// argument or a path printed in the job's blocks is always indented deeper than the lines it
// reads, and cannot contain a tab or a newline (the builder refuses them), so no chamber path
// can forge a state, a pid or a calendar.

// maxPrintOutput bounds what is read of `launchctl print` (a job's description is a few KiB).
const maxPrintOutput = 1 << 20

// calendarStream is the event stream of StartCalendarInterval triggers.
const calendarStream = "com.apple.launchd.calendarinterval"

// launchctlJob is what this package reads from `launchctl print`.
type launchctlJob struct {
	Target    string // the header: gui/501/<label>
	State     string // "running", "not running", ...
	PID       int    // 0 when not running
	Calendars []CalendarInterval
}

// Running reports whether the job has a process now.
func (j *launchctlJob) Running() bool { return j.State == "running" || j.PID > 0 }

type printBlock struct {
	name  string
	depth int
	line  int
	// What an entry of `event triggers` says about its trigger.
	stream   string
	desc     map[string]int // the numeric fields of its descriptor
	descLine int            // where the descriptor starts
	badField string         // the first descriptor field that is not a number
	badLine  int
}

// parseLaunchctlPrint reads the description of one job. Problems carry the line number.
func parseLaunchctlPrint(out []byte) (*launchctlJob, error) {
	if len(out) > maxPrintOutput {
		return nil, fmt.Errorf("launchctl print output is larger than %d bytes", maxPrintOutput)
	}
	j := &launchctlJob{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), maxPrintOutput+1)
	var stack []*printBlock
	n, closed := 0, false
	for sc.Scan() {
		n++
		line := sc.Text()
		if !utf8.ValidString(line) {
			return nil, &ParseError{Line: n, Msg: "not valid UTF-8"}
		}
		line = strings.TrimSuffix(line, "\r")
		if closed {
			if strings.TrimSpace(line) != "" {
				return nil, &ParseError{Line: n, Msg: "text after the end of the job"}
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if stack == nil {
			target, ok := strings.CutSuffix(line, " = {")
			if !ok || target == "" || strings.ContainsAny(target, " \t") {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("want a header `<domain>/<label> = {`, got %.80q", line)}
			}
			j.Target = target
			stack = []*printBlock{{name: target, depth: 0, line: n}}
			continue
		}
		depth := 0
		for depth < len(line) && line[depth] == '\t' {
			depth++
		}
		rest := line[depth:]
		// A line at depth d ends every block opened at depth d or deeper.
		for len(stack) > 0 && stack[len(stack)-1].depth >= depth {
			if err := endBlock(j, stack); err != nil {
				return nil, err
			}
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			if rest != "}" {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("unindented line %.80q inside the job", line)}
			}
			closed = true
			continue
		}
		if rest == "}" {
			continue
		}
		parent := stack[len(stack)-1]
		if name, ok := blockName(rest); ok {
			if name == "descriptor" && isTriggerEntryBlock(stack) {
				if parent.desc != nil {
					return nil, &ParseError{Line: n, Msg: "event trigger with two descriptors"}
				}
				parent.desc, parent.descLine = map[string]int{}, n
			}
			stack = append(stack, &printBlock{name: name, depth: depth, line: n})
			continue
		}
		key, value, ok := cutKeyValue(rest)
		if !ok {
			continue // an argument, or another bare line
		}
		switch {
		case len(stack) == 1 && key == "state":
			j.State = value
		case len(stack) == 1 && key == "pid":
			pid, err := strconv.Atoi(value)
			if err != nil || pid <= 0 {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("pid %q is not a process id", value)}
			}
			j.PID = pid
		case isTriggerEntryBlock(stack) && key == "stream":
			parent.stream = value
		case parent.name == "descriptor" && isTriggerEntryBlock(stack[:len(stack)-1]):
			entry := stack[len(stack)-2]
			k := strings.Trim(key, `"`)
			v, err := strconv.Atoi(value)
			if err != nil {
				// Not a calendar field (a WatchPaths array, for one): endBlock refuses it if
				// the entry turns out to be a calendar trigger.
				if entry.badLine == 0 {
					entry.badField, entry.badLine = k, n
				}
				continue
			}
			if _, dup := entry.desc[k]; dup {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("descriptor field %s given twice", k)}
			}
			entry.desc[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Line: n + 1, Msg: fmt.Sprintf("read: %v", err)}
	}
	if !closed {
		if stack == nil {
			return nil, &ParseError{Line: n, Msg: "no job description"}
		}
		return nil, &ParseError{Line: n, Msg: "the job description ends before its closing brace"}
	}
	return j, nil
}

// blockName recognizes a line that opens a block: `name = {` or `name => {`.
func blockName(rest string) (string, bool) {
	if s, ok := strings.CutSuffix(rest, " => {"); ok {
		return s, true
	}
	if s, ok := strings.CutSuffix(rest, " = {"); ok {
		return s, true
	}
	return "", false
}

// cutKeyValue splits `key = value` or `key => value` at the first separator.
func cutKeyValue(rest string) (string, string, bool) {
	i, j := strings.Index(rest, " = "), strings.Index(rest, " => ")
	switch {
	case j >= 0 && (i < 0 || j < i):
		return rest[:j], rest[j+4:], true
	case i >= 0:
		return rest[:i], rest[i+3:], true
	}
	return "", "", false
}

// isTriggerEntryBlock reports whether the innermost block of stack is an entry of the job's
// own `event triggers` block: [job, event triggers, entry].
func isTriggerEntryBlock(stack []*printBlock) bool {
	return len(stack) == 3 && stack[1].name == "event triggers"
}

// endBlock finishes the innermost block of stack: a calendar trigger entry becomes a
// CalendarInterval.
func endBlock(j *launchctlJob, stack []*printBlock) error {
	if !isTriggerEntryBlock(stack) {
		return nil
	}
	e := stack[len(stack)-1]
	if e.stream != calendarStream {
		return nil
	}
	if e.desc == nil {
		return &ParseError{Line: e.line, Msg: "calendar trigger without a descriptor"}
	}
	if e.badLine != 0 {
		return &ParseError{Line: e.badLine, Msg: fmt.Sprintf("calendar field %s is not a number", e.badField)}
	}
	line := e.descLine
	var c CalendarInterval
	fields := []struct {
		name string
		to   *int
	}{{"Month", &c.Month}, {"Day", &c.Day}, {"Hour", &c.Hour}, {"Minute", &c.Minute}}
	for k := range e.desc {
		known := false
		for _, f := range fields {
			known = known || f.name == k
		}
		if !known {
			return &ParseError{Line: line, Msg: fmt.Sprintf("calendar trigger has a %s field, which cryochamber never writes", k)}
		}
	}
	for _, f := range fields {
		v, ok := e.desc[f.name]
		if !ok {
			return &ParseError{Line: line, Msg: fmt.Sprintf("calendar trigger has no %s (every cryochamber timer names month, day, hour and minute)", f.name)}
		}
		*f.to = v
	}
	if err := c.valid(); err != nil {
		return &ParseError{Line: line, Msg: "calendar trigger: " + err.Error()}
	}
	j.Calendars = append(j.Calendars, c)
	return nil
}

// Reading `launchctl print-disabled gui/<uid>`.
//
// It lists the labels launchd was told not to load (`launchctl disable`, `launchctl unload
// -w`), which outlive their plist files. Two layouts are in the wild: `"label" => true/false`
// (ninehills/blog#85, 2021) and, on macOS 14 and later, `"label" => disabled/enabled`
// (ggbond268/MacTools#116, captured on macOS 26.5.1):
//
//	disabled services = {
//		"com.docker.helper" => enabled
//		"dev.cryochamber.cryo-garden-ee66b621.wake" => disabled
//	}
//	login item associations = {
//		"com.docker.helper" => "com.docker.docker"
//	}

// parsePrintDisabled returns the labels of the `disabled services` block and whether each is
// disabled. Problems carry the line number.
func parsePrintDisabled(out []byte) (map[string]bool, error) {
	if len(out) > maxPrintOutput {
		return nil, fmt.Errorf("launchctl print-disabled output is larger than %d bytes", maxPrintOutput)
	}
	labels := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), maxPrintOutput+1)
	n, in, seen := 0, false, false
	for sc.Scan() {
		n++
		line := strings.TrimSuffix(sc.Text(), "\r")
		if !utf8.ValidString(line) {
			return nil, &ParseError{Line: n, Msg: "not valid UTF-8"}
		}
		switch {
		case !in && line == "disabled services = {":
			if seen {
				return nil, &ParseError{Line: n, Msg: "two disabled services blocks"}
			}
			in, seen = true, true
		case in && line == "}":
			in = false
		case in:
			rest, ok := strings.CutPrefix(line, "\t")
			key, value, ok2 := strings.Cut(rest, " => ")
			if !ok || !ok2 || len(key) < 2 || key[0] != '"' || key[len(key)-1] != '"' {
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("want `\"label\" => disabled`, got %.80q", line)}
			}
			label := key[1 : len(key)-1]
			switch value {
			case "true", "disabled":
				labels[label] = true
			case "false", "enabled":
				labels[label] = false
			default:
				return nil, &ParseError{Line: n, Msg: fmt.Sprintf("%s is neither enabled nor disabled: %.40q", label, value)}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Line: n + 1, Msg: fmt.Sprintf("read: %v", err)}
	}
	if in {
		return nil, &ParseError{Line: n, Msg: "the disabled services block ends before its closing brace"}
	}
	if !seen {
		return nil, &ParseError{Line: n, Msg: "no disabled services block"}
	}
	return labels, nil
}
