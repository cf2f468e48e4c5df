package timer

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestQuoteExec(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"plain", `"plain"`},
		{"", `""`},
		{"with space", `"with space"`},
		{`back\slash`, `"back\\slash"`},
		{`"quoted"`, `"\"quoted\""`},
		{"it's", `"it's"`},
		{"100%", `"100%%"`},
		{"%h%%", `"%%h%%%%"`},
		{"$HOME ${HOME} $$", `"$$HOME $${HOME} $$$$"`},
		{";", `";"`},
		{"été ✓ 日本", `"été ✓ 日本"`},
		{`\n`, `"\\n"`},
	}
	for _, tt := range tests {
		got, err := QuoteExec(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("QuoteExec(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestQuoteExecRefuses(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"a\nb", "line break at byte 1"},
		{"a\rb", "line break"},
		{"tab\there", "control character U+0009"},
		{"nul\x00", "control character U+0000"},
		{"del\x7f", "control character U+007F"},
		{"c1\u0085", "control character U+0085"},
		{"bad\xffutf8", "not valid UTF-8"},
	}
	for _, tt := range tests {
		_, err := QuoteExec(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("QuoteExec(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestEscapePath(t *testing.T) {
	tests := []struct {
		in, plain, glob string
	}{
		{"/home/a/chamber/.cryo/env", "/home/a/chamber/.cryo/env", "/home/a/chamber/.cryo/env"},
		{"/a b/100%/é", "/a b/100%%/é", "/a b/100%%/é"},
		{`/q "x" 'y' $HOME`, `/q "x" 'y' $HOME`, `/q "x" 'y' $HOME`},
		{`/back\slash/[x]*?`, `/back\slash/[x]*?`, `/back\\slash/\[x]\*\?`},
	}
	for _, tt := range tests {
		if got, err := EscapePath(tt.in); err != nil || got != tt.plain {
			t.Errorf("EscapePath(%q) = %q, %v; want %q", tt.in, got, err, tt.plain)
		}
		if got, err := EscapeGlobPath(tt.in); err != nil || got != tt.glob {
			t.Errorf("EscapeGlobPath(%q) = %q, %v; want %q", tt.in, got, err, tt.glob)
		}
	}
}

func TestEscapePathRefuses(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"relative/env", "not absolute"},
		{"", "not absolute"},
		{"/a/env ", "ends in whitespace"},
		{"/a/env\u00a0", "ends in whitespace"},
		{`/a/env\`, "ends in a backslash"},
		{"/a\n/env", "line break"},
		{"/a\t/env", "control character"},
		{"/a\xff", "not valid UTF-8"},
		{"/a/../env", "not clean"},
		{"/a//env", "not clean"},
		{"/a/env/", "not clean"},
		{"/" + strings.Repeat("x", 4095), "longer than 4095 bytes"},
	}
	for _, tt := range tests {
		for name, f := range map[string]func(string) (string, error){"EscapePath": EscapePath, "EscapeGlobPath": EscapeGlobPath} {
			_, err := f(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s(%q) error = %v, want %q", name, tt.in, err, tt.want)
			}
		}
	}
}

func TestExecLineRefusesExecutables(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{nil, "empty command line"},
		{[]string{"cryochamber"}, "not an absolute path"},
		{[]string{"/opt/bin/"}, "names a directory"},
		{[]string{`/opt/"q"/cryochamber`}, `contains '"'`},
		{[]string{`/opt/it's/cryochamber`}, `contains '\''`},
		{[]string{`/opt/back\slash/cryochamber`}, `contains '\\'`},
		{[]string{`/opt/$HOME/cryochamber`}, `contains '$'`},
		{[]string{"/opt/a\nb"}, "line break"},
		{[]string{"/bin/true", "ok", "bad\x01"}, "argument 2: ExecStart word"},
	}
	for _, tt := range tests {
		_, err := ExecLine(tt.argv)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ExecLine(%q) error = %v, want %q", tt.argv, err, tt.want)
		}
	}
	if got, err := ExecLine([]string{"/opt/a b 100% é/cryochamber", "wake"}); err != nil || got != `"/opt/a b 100%% é/cryochamber" "wake"` {
		t.Errorf("ExecLine = %q, %v", got, err)
	}
}

func TestUnquoteExec(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`"/bin/x" "a b" ""`, []string{"/bin/x", "a b", ""}},
		{`/bin/x plain  words`, []string{"/bin/x", "plain", "words"}},
		{`"/bin/x" "\\ \" \n \t \x41 \101 \u00e9 \s"`, []string{"/bin/x", "\\ \" \n \t A A é  "}},
		{`'/bin/x' 'single "q" $$'`, []string{"/bin/x", `single "q" $`}},
		{`a"b c"d`, []string{"ab cd"}},
		{`"100%%" "%%%%" "$$HOME" "$${X}" "a$b" "$$"`, []string{"100%", "%%", "$HOME", "${X}", "a$b", "$"}},
		{"\t \"x\" \t", []string{"x"}},
		{`";"`, []string{";"}},
	}
	for _, tt := range tests {
		got, err := UnquoteExec(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("UnquoteExec(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestUnquoteExecRefuses(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{``, "ExecStart is empty"},
		{`   `, "ExecStart is empty"},
		{`"/bin/x" "open`, "byte 9: unbalanced \" quote"},
		{`'/bin/x`, "unbalanced ' quote"},
		{`/bin/x \q`, `unknown escape \q`},
		{`/bin/x "a\`, "backslash at the end"},
		{`/bin/x \x4`, "short escape"},
		{`/bin/x \xzz`, "bad escape"},
		{`/bin/x \000`, "NUL"},
		{`/bin/x \ud800`, "not a valid code point"},
		{`/bin/x ; /bin/y`, "several commands"},
		{`/bin/x %h`, "specifier %h"},
		{`/bin/x 100%`, "lone %"},
		{`/bin/x $HOME`, "variable reference"},
		{`/bin/x "$"`, "variable reference"},
		{`/bin/x a${HOME}`, "refers to a variable"},
		{"/bin/x \xff", "not valid UTF-8"},
	}
	for _, tt := range tests {
		_, err := UnquoteExec(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("UnquoteExec(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestOnCalendar(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	tests := []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC), "2026-03-08 09:00:00 UTC"},
		{time.Date(2026, 3, 8, 9, 0, 0, 1, time.UTC), "2026-03-08 09:00:01 UTC"},
		{time.Date(2026, 12, 31, 23, 59, 59, 500_000_000, time.UTC), "2027-01-01 00:00:00 UTC"},
		{time.Date(2026, 3, 8, 10, 0, 0, 0, cet), "2026-03-08 09:00:00 UTC"},
		{time.Date(2199, 12, 31, 23, 59, 59, 0, time.UTC), "2199-12-31 23:59:59 UTC"},
		{time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC), "1970-01-01 00:00:01 UTC"},
	}
	for _, tt := range tests {
		got, err := OnCalendar(tt.at)
		if err != nil || got != tt.want {
			t.Errorf("OnCalendar(%v) = %q, %v; want %q", tt.at, got, err, tt.want)
		}
	}
	refused := []struct {
		at   time.Time
		want string
	}{
		{time.Time{}, "no time given"},
		{time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), "1970 to 2199"},
		{time.Date(2199, 12, 31, 23, 59, 59, 1, time.UTC), "1970 to 2199"}, // rounds up into 2200
		{time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), "1970 to 2199"},
	}
	for _, tt := range refused {
		_, err := OnCalendar(tt.at)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("OnCalendar(%v) error = %v, want %q", tt.at, err, tt.want)
		}
	}
}

// TestOnCalendarSystemdAgrees asks systemd how it reads our OnCalendar= values.
func TestOnCalendarSystemdAgrees(t *testing.T) {
	e2e.LookPath(t, "systemd-analyze", "systemd")
	for _, at := range []time.Time{
		time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC),
		time.Date(2199, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2040, 2, 29, 12, 30, 15, 250, time.FixedZone("X", -7*3600)),
	} {
		cal, err := OnCalendar(at)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("systemd-analyze", "calendar", cal).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze calendar %q: %v\n%s", cal, err, out)
		}
		if !strings.Contains(string(out), "Normalized form: "+cal) {
			t.Errorf("systemd reads %q as:\n%s", cal, out)
		}
	}
}

// goldenChambers are the fixtures of the golden unit files. The awkward one has every character
// that systemd would otherwise expand, split, unquote or glob.
func goldenChambers() []struct {
	name string
	bin  string
	c    Chamber
	at   time.Time
} {
	plain := "/home/alice/plans/garden"
	awkward := `/home/alice/My Plans/100% "best" 'ever' $HOME ${X} \ é ✓ [x]*?`
	mk := func(dir string) Chamber {
		return Chamber{ID: ID(dir), Dir: dir, EnvFile: filepath.Join(dir, ".cryo", "env")}
	}
	return []struct {
		name string
		bin  string
		c    Chamber
		at   time.Time
	}{
		{"plain", "/usr/local/bin/cryochamber", mk(plain), time.Date(2026, 3, 8, 9, 0, 0, 0, time.UTC)},
		{"awkward", "/opt/cryo chamber 100% é/bin/cryochamber", mk(awkward), time.Date(2026, 11, 22, 10, 0, 3, 200_000_000, time.UTC)},
	}
}

// goldenUnits renders every unit of a fixture chamber: name → file content.
func goldenUnits(t *testing.T, bin string, c Chamber, at time.Time) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for i, k := range Kinds {
		j := Job{Kind: k, At: at.Add(time.Duration(i) * time.Hour), Argv: []string{bin, string(k), "--dir", c.Dir}}
		svc, tmr, err := SystemdUnits(c, j)
		if err != nil {
			t.Fatal(err)
		}
		out[SystemdServiceName(c.ID, k)] = mustSerialize(t, svc)
		out[SystemdTimerName(c.ID, k)] = mustSerialize(t, tmr)
	}
	path, wake, err := SystemdPath(c, filepath.Join(c.Dir, "messages", "inbox"), []string{bin, "wake", "--dir", c.Dir})
	if err != nil {
		t.Fatal(err)
	}
	out[SystemdPathName(c.ID)] = mustSerialize(t, path)
	if !bytes.Equal(mustSerialize(t, wake), out[SystemdServiceName(c.ID, Wake)]) {
		t.Errorf("SystemdPath's wake service differs from SystemdUnits'")
	}
	boot, err := SystemdBoot(c, []string{bin, "wake", "--dir", c.Dir})
	if err != nil {
		t.Fatal(err)
	}
	out[SystemdBootName(c.ID)] = mustSerialize(t, boot)
	return out
}

// The transient timer holds what its unit-file form (the golden file) says, in D-Bus types.
func TestTimerProperties(t *testing.T) {
	g := goldenChambers()[1]
	_, tmr, err := SystemdUnits(g.c, Job{Kind: Fallback, At: g.at, Argv: []string{g.bin, "fallback"}})
	if err != nil {
		t.Fatal(err)
	}
	props, err := timerProperties(tmr)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range props {
		got[p.Name] = p.Value.String()
	}
	want := map[string]string{
		"Description":       `"cryochamber fallback timer for ` + g.c.ID + `"`,
		"CollectMode":       `"inactive-or-failed"`,
		"OnCalendar":        `"2026-11-22 10:00:04 UTC"`,
		"AccuracyUSec":      "@t 1000000",
		"RemainAfterElapse": "false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("timerProperties =\n %v\nwant\n %v", got, want)
	}
	if _, err := timerProperties(append(tmr, unit.NewUnitOption("Timer", "Persistent", "true"))); err == nil {
		t.Error("timerProperties accepted an option it does not translate")
	}
}

func mustSerialize(t *testing.T, opts []*unit.UnitOption) []byte {
	t.Helper()
	data, err := serializeUnit(opts)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSystemdUnitsGolden(t *testing.T) {
	for _, g := range goldenChambers() {
		t.Run(g.name, func(t *testing.T) {
			units := goldenUnits(t, g.bin, g.c, g.at)
			dir := filepath.Join("testdata", "units", g.name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, data := range units {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatalf("%v (run with -update to create the golden files)", err)
			}
			if len(ents) != len(units) {
				t.Errorf("%s holds %d files, the fixture renders %d units", dir, len(ents), len(units))
			}
			for name, data := range units {
				want, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Errorf("%v (run with -update)", err)
					continue
				}
				if !bytes.Equal(data, want) {
					t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, data, want)
				}
			}
			// Every value the chamber gave comes back out of the units unchanged.
			exec := execStartFromFile(t, filepath.Join(dir, SystemdServiceName(g.c.ID, Wake)))
			argv, err := UnquoteExec(exec)
			if err != nil || !slices.Equal(argv, []string{g.bin, "wake", "--dir", g.c.Dir}) {
				t.Errorf("UnquoteExec(golden ExecStart) = %q, %v", argv, err)
			}
		})
	}
}

func execStartFromFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := execStartOf(string(data))
	if !ok {
		t.Fatalf("%s has no ExecStart=", path)
	}
	return v
}

func TestSystemdUnitsCarryNoEnvironment(t *testing.T) {
	g := goldenChambers()[0]
	svc, _, err := SystemdUnits(g.c, Job{Kind: Wake, At: g.at, Argv: []string{g.bin, "wake"}})
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"Description": true, "StartLimitIntervalSec": true, "Type": true, "ExecStart": true, "EnvironmentFile": true, "TimeoutStartSec": true}
	for _, o := range svc {
		if !allowed[o.Name] {
			t.Errorf("service carries %s=%s; only the 0600 environment file may hold variables", o.Name, o.Value)
		}
	}
}

func TestSystemdUnitsRefuse(t *testing.T) {
	g := goldenChambers()[0]
	ok := Job{Kind: Wake, At: g.at, Argv: []string{g.bin, "wake"}}
	tests := []struct {
		name string
		c    Chamber
		j    Job
		want string
	}{
		{"kind", g.c, Job{Kind: "daily", At: g.at, Argv: ok.Argv}, `unknown timer kind "daily"`},
		{"no time", g.c, Job{Kind: Wake, Argv: ok.Argv}, "wake timer: no time given"},
		{"year", g.c, Job{Kind: Fallback, At: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), Argv: ok.Argv}, "fallback timer: time 2300-01-01T00:00:00Z is outside"},
		{"no argv", g.c, Job{Kind: Wake, At: g.at}, "wake service: empty command line"},
		{"argv newline", g.c, Job{Kind: Wake, At: g.at, Argv: []string{g.bin, "x\ny"}}, "wake service: argument 1"},
		{"no env file", Chamber{ID: g.c.ID}, ok, "no environment file"},
		{"env file", Chamber{ID: g.c.ID, EnvFile: "env"}, ok, "environment file: path \"env\" is not absolute"},
		{"id slash", Chamber{ID: "cryo-a/b", EnvFile: g.c.EnvFile}, ok, `invalid chamber id "cryo-a/b"`},
		{"id prefix", Chamber{ID: "other-1234", EnvFile: g.c.EnvFile}, ok, `invalid chamber id "other-1234"`},
		{"id upper", Chamber{ID: "cryo-ABC", EnvFile: g.c.EnvFile}, ok, `invalid chamber id "cryo-ABC"`},
		{"long line", g.c, Job{Kind: Wake, At: g.at, Argv: []string{g.bin, strings.Repeat("%", 1<<19)}}, "longer than systemd's limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := SystemdUnits(tt.c, tt.j)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("SystemdUnits error = %v, want %q", err, tt.want)
			}
		})
	}
	if _, _, err := SystemdPath(g.c, "inbox", ok.Argv); err == nil || !strings.Contains(err.Error(), "inbox watcher: path \"inbox\" is not absolute") {
		t.Errorf("SystemdPath with a relative dir: %v", err)
	}
}

// verifyUnits runs `systemd-analyze verify --user` on a set of units (name → content) in a
// fresh directory, with the first ExecStart word replaced by a real executable (verify checks
// that it exists). It skips when systemd-analyze is missing (fails under CRYO_REQUIRE_E2E).
func verifyUnits(t testing.TB, units map[string][]byte, bin string) {
	t.Helper()
	e2e.LookPath(t, "systemd-analyze", "systemd")
	tmp := t.TempDir()
	exe := filepath.Join(tmp, "bin 100% é", "cryochamber")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	from, err := QuoteExec(bin)
	if err != nil {
		t.Fatal(err)
	}
	to, err := QuoteExec(exe)
	if err != nil {
		t.Fatal(err)
	}
	unitDir := filepath.Join(tmp, "units")
	if err := os.Mkdir(unitDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for name, data := range units {
		data = bytes.ReplaceAll(data, []byte("ExecStart="+from), []byte("ExecStart="+to))
		p := filepath.Join(unitDir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	runtime := filepath.Join(tmp, "runtime")
	if err := os.Mkdir(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "systemd-analyze", append([]string{"--user", "--man=no", "verify"}, paths...)...)
	// --user needs a runtime directory; a fresh HOME keeps the real user's units out of it.
	cmd.Env = []string{"HOME=" + tmp, "XDG_RUNTIME_DIR=" + runtime, "XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"),
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	// It warns (without failing) when it cannot stat /proc/1/root in a container.
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.Contains(line, "/proc/1/root") && !strings.Contains(line, "running in chroot") {
			problems = append(problems, line)
		}
	}
	if err != nil || len(problems) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\nunits:\n%s", err, strings.Join(problems, "\n"), dumpUnits(units))
	}
}

func dumpUnits(units map[string][]byte) string {
	var b strings.Builder
	for name, data := range units {
		fmt.Fprintf(&b, "# %s\n%s\n", name, data)
	}
	return b.String()
}

func TestSystemdUnitsVerify(t *testing.T) {
	for _, g := range goldenChambers() {
		t.Run(g.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "units", g.name)
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			units := map[string][]byte{}
			for _, e := range ents {
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				units[e.Name()] = data
			}
			verifyUnits(t, units, g.bin)
		})
	}
}

// TestVerifyCatchesBadUnits proves the verify step can fail: a unit systemd refuses.
func TestVerifyCatchesBadUnits(t *testing.T) {
	e2e.LookPath(t, "systemd-analyze", "systemd")
	bad := map[string][]byte{"cryo-x-00000000-wake.service": []byte("[Service]\nType=oneshot\nExecStart=\"/bin/true\" \"%Z\"\n")}
	ft := &fakeT{TB: t}
	verifyUnits(ft, bad, "/bin/true")
	if !ft.failed {
		t.Fatal("systemd-analyze verify accepted a unit with an unknown specifier")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(format string, args ...any) { f.failed = true }

var verified atomic.Int64

// FuzzQuoteExec: QuoteExec either refuses (and then only for a reason it names) or
// UnquoteExec reads back exactly the input. A sample of inputs also goes through
// systemd-analyze verify.
func FuzzQuoteExec(f *testing.F) {
	_, noAnalyze := exec.LookPath("systemd-analyze")
	if noAnalyze != nil && e2e.Required() {
		f.Fatalf("%s is set, and systemd-analyze is not installed (Debian package systemd): %v", e2e.RequireEnv, noAnalyze)
	}
	for _, s := range []string{"", "plain", "a b", `"q"`, `\`, `\\"`, "100%", "%%", "$", "$$", "${HOME}",
		"$HOME", ";", "\\;", "'", "é ✓ 日本", "a\nb", "\t", "\x00", "\xff", "%h", "`x`", " lead", "trail "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := QuoteExec(s)
		if err != nil {
			if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
				t.Fatalf("QuoteExec(%q) refused a printable string: %v", s, err)
			}
			return
		}
		got, err := UnquoteExec(q)
		if err != nil || len(got) != 1 || got[0] != s {
			t.Fatalf("UnquoteExec(QuoteExec(%q) = %s) = %q, %v", s, q, got, err)
		}
		got, err = UnquoteExec(`"/bin/true" ` + q + " " + q)
		if err != nil || !slices.Equal(got, []string{"/bin/true", s, s}) {
			t.Fatalf("UnquoteExec(two words %s) = %q, %v", q, got, err)
		}
		if n := verified.Add(1); noAnalyze == nil && (n <= 30 || n%500 == 0) {
			verifyUnits(t, map[string][]byte{"cryo-fuzz-00000000-wake.service": []byte(
				"[Service]\nType=oneshot\nExecStart=\"/bin/true\" " + q + "\n")}, "/bin/true")
		}
	})
}

// FuzzUnquoteExec: any line is either refused or split into words that QuoteExec (when it
// accepts them) writes back to the same words.
func FuzzUnquoteExec(f *testing.F) {
	for _, s := range []string{`"/bin/x" "a b"`, `a"b c"d`, `'x' \x41 \101`, `"%%" "$$"`, `"open`, `\q`, `;`, `$X`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := UnquoteExec(line)
		if err != nil {
			return
		}
		quoted := make([]string, 0, len(words))
		for _, w := range words {
			q, err := QuoteExec(w)
			if err != nil {
				return // a word with a control character, from an escape
			}
			quoted = append(quoted, q)
		}
		again, err := UnquoteExec(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("%q → %q → %q, %v", line, words, again, err)
		}
	})
}
