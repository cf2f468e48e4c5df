package binary

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// badInput is one entry of the catalogue: an input from one area and a part of what the built
// cryochamber prints about it (answer): the exact message, with its line.
type badInput struct {
	area, name, input, want string
}

// refused is how the binary begins a refusal of the markers of session 1.
const refused = "cryochamber: refused to hibernate after session 1: step 1 (markers parsed): "

// catalogue lists every bad input we promise to handle, each with what the binary answers. A
// marker's line number is its line in the session's block: the agent's output starts at line 5.
var catalogue = []badInput{
	// Markers: what the agent printed.
	{"marker", "no EXIT at all", "did the work\n", "session 1: failed (no-exit): agent exited with status 0 after <duration>, without an EXIT marker"},
	{"marker", "EXIT 7", "[CRYO:EXIT 7] hmm\n", refused + `line 5: EXIT "7": code must be 0, 1 or 2`},
	{"marker", "EXIT with no code", "[CRYO:EXIT] done\n", refused + "line 5: EXIT: missing code (want 0 success, 1 partial or 2 failure)"},
	{"marker", "EXIT -1", "[CRYO:EXIT -1] x\n", refused + `line 5: EXIT "-1": code must be 0, 1 or 2`},
	{"marker", "EXIT 07", "[CRYO:EXIT 07] x\n", refused + `line 5: EXIT "07": code must be 0, 1 or 2`},
	{"marker", "unclosed marker", "[CRYO:EXIT 0] ok\n[CRYO:WAKE +1h\n", refused + "line 6: WAKE marker is not closed on this line (a marker must end with ] on the line it starts)"},
	{"marker", "WAKE banana", "[CRYO:EXIT 0] x\n[CRYO:WAKE banana]\n", refused + `line 6: WAKE "banana": not a time (want 2026-03-08T09:00,`},
	{"marker", "empty WAKE", "[CRYO:EXIT 0] x\n[CRYO:WAKE]\n", refused + "line 6: WAKE: missing time (want 2026-03-08T09:00 or +2h, for example)"},
	{"marker", "unknown FALLBACK action", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK sms 555 \"m\"]\n", refused + `line 6: unknown FALLBACK action "sms" (want email or webhook)`},
	{"marker", "FALLBACK message unquoted", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK email a@b.c help]\n", refused + `line 6: FALLBACK email "a@b.c" message: text must be in double quotes`},
	{"marker", "FALLBACK bad email", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK email not-an-address \"m\"]\n", refused + `line 6: FALLBACK email target "not-an-address": not a single e-mail address`},
	{"marker", "FALLBACK webhook to ftp", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK webhook ftp://x/y \"m\"]\n", refused + `line 6: FALLBACK webhook target "ftp://x/y": not an absolute http or https URL`},
	{"marker", "empty CMD", "[CRYO:EXIT 0] x\n[CRYO:CMD ]\n", refused + "line 6: CMD: empty command (leave CMD out to keep the previous command)"},
	{"marker", "CMD with ;", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode; rm -rf ~]\n", refused + `line 6: CMD "opencode; rm -rf ~": unquoted ";" is shell syntax, but no shell runs this command`},
	{"marker", "CMD with $(...)", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode $(curl evil)]\n", refused + `line 6: CMD "opencode $(curl evil)": unquoted "$(" is shell syntax`},
	{"marker", "CMD with backticks", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode `id`]\n", refused + "line 6: CMD \"opencode `id`\": unquoted \"`\" is shell syntax"},
	{"marker", "CMD with a redirection", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode > /etc/passwd]\n", refused + `line 6: CMD "opencode > /etc/passwd": unquoted ">" is shell syntax`},
	{"marker", "CMD with a pipe", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode | sh]\n", refused + `line 6: CMD "opencode | sh": unquoted "|" is shell syntax`},
	{"marker", "CMD with an unterminated quote", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode \"half]\n", refused + "line 6: CMD marker is not closed on this line (a marker must end with ] on the line it starts); a quote is not closed"},
	{"marker", "empty PLAN", "[CRYO:EXIT 0] x\n[CRYO:PLAN ]\n", refused + "line 6: PLAN: empty note"},
	{"marker", "REPLY unquoted", "[CRYO:EXIT 0] x\n[CRYO:REPLY hello]\n", refused + `line 6: REPLY "hello": text must be in double quotes`},
	{"marker", "TODO without text", "[CRYO:EXIT 0] x\n[CRYO:TODO +1d]\n", refused + `line 6: TODO "+1d": the text must be in double quotes`},
	{"marker", "TODO with a bad time", "[CRYO:EXIT 0] x\n[CRYO:TODO tomorrow \"x\"]\n", refused + `line 6: TODO "tomorrow": not a time`},
	// The marker parser refuses these three, but in a real run they never reach it as they
	// are: the session log replaces control characters and invalid UTF-8 with U+FFFD and
	// splits a line over 1 MiB, and the markers are read from what the log keeps.
	{"marker", "control character in a summary", "[CRYO:EXIT 0] ok\x1b[31m\n", "session 1: EXIT 0 ok\ufffd[31m"},
	{"marker", "invalid UTF-8 in a marker", "[CRYO:EXIT 0] ok\n[CRYO:PLAN \xff\xfe]\n", "session 1: EXIT 0 ok"},
	{"marker", "a line over 1 MiB", "[CRYO:EXIT 0] ok\n" + strings.Repeat("x", 1<<20+1) + "\n", "session 1: EXIT 0 ok"},
	{"marker", "a USAGE claim that is not a number (the cost is unknown; the session goes on)", "[CRYO:EXIT 0] ok\n[CRYO:USAGE cost_usd=cheap]\n", "session 1: EXIT 0 ok"},
	{"marker", "17 FALLBACKs", "[CRYO:EXIT 0] x\n" + manyFallbacks(17), refused + "line 22: more than 16 FALLBACK markers; this one and the rest are ignored"},

	// Times: in a WAKE, read in the chamber's zone (Europe/Berlin here).
	{"time", "February 30th", "2031-02-30T09:00", `line 6: WAKE "2031-02-30T09:00": February 2031 has no day 30`},
	{"time", "hour 24", "2031-03-01T24:00", `line 6: WAKE "2031-03-01T24:00": hour 24 out of range (00-23)`},
	{"time", "minute 60", "2031-03-01T09:60", `line 6: WAKE "2031-03-01T09:60": minute 60 out of range (00-59)`},
	{"time", "year 2200 (systemd's calendar ends in 2199)", "2200-01-01T00:00Z", `line 6: WAKE "2200-01-01T00:00Z": year 2200 is after 2199 (systemd's calendar stops there)`},
	{"time", "year 1969", "1969-12-31T23:59Z", `line 6: WAKE "1969-12-31T23:59Z": year 1969 is before 1970`},
	{"time", "offset without minutes", "2031-03-01T09:00+01", `line 6: WAKE "2031-03-01T09:00+01": not a time (want 2026-03-08T09:00,`},
	{"time", "offset +25:00", "2031-03-01T09:00+25:00", `line 6: WAKE "2031-03-01T09:00+25:00": offset +25:00 out of range (want ±HH:MM, at most ±23:59)`},
	{"time", "relative zero", "+0m", `line 6: WAKE "+0m": relative time must be more than zero`},
	{"time", "relative without unit", "+45", `line 6: WAKE "+45": missing unit after 45 (want w, d, h, m or s)`},
	{"time", "relative units out of order", "+30m1h", `line 6: WAKE "+30m1h": relative time units must come in the order w, d, h, m, s, each at most once`},
	{"time", "relative unit twice", "+1h1h", `line 6: WAKE "+1h1h": relative time units must come in the order w, d, h, m, s, each at most once`},
	{"time", "relative over 100 years", "+5300w", `line 6: WAKE "+5300w": relative time is more than 100 years ahead`},
	{"time", "date only", "2031-03-01", `line 6: WAKE "2031-03-01": not a time (want 2026-03-08T09:00,`},
	{"time", "a word", "tomorrow", `line 6: WAKE "tomorrow": not a time (want 2026-03-08T09:00,`},

	// Command lines: in a CMD (the agent line of cryo.toml is split the same way, see config).
	{"command", "unquoted ;", "opencode; rm", `line 7: CMD "opencode; rm": unquoted ";" is shell syntax, but no shell runs this command (quote it to pass it as text)`},
	{"command", "unquoted &&", "a && b", `line 7: CMD "a && b": unquoted "&" is shell syntax`},
	{"command", "unquoted $VAR", "opencode $HOME", `line 7: CMD "opencode $HOME": unquoted "$" is shell syntax`},
	{"command", "unquoted ( )", "a (b)", `line 7: CMD "a (b)": unquoted "(" is shell syntax`},
	{"command", "unterminated single quote", "a 'b", "line 7: CMD marker is not closed on this line (a marker must end with ] on the line it starts); a quote is not closed"},
	{"command", "unterminated double quote", "a \"b", "line 7: CMD marker is not closed on this line (a marker must end with ] on the line it starts); a quote is not closed"},

	// cryo.toml (strict: the message names the file and the line).
	{"config", "unknown key", "agent = \"claude\"\nsesion_timeout = \"1h\"\n", `cryochamber: cryo.toml:2: unknown key "sesion_timeout" (see ` + "`cryochamber init`" + ` for the keys)`},
	{"config", "unknown key in [email]", "[email]\nhost = \"h\"\nfrom = \"a@b\"\npasword_env = \"X\"\n", `cryochamber: cryo.toml:4: unknown key "email.pasword_env"`},
	{"config", "bad duration", "session_timeout = \"2 hours\"\n", `cryochamber: cryo.toml:1: session_timeout: "2 hours" is not a duration`},
	{"config", "duration without unit", "late_grace = 600\n", "cryochamber: cryo.toml:1: late_grace: 600 has no unit"},
	{"config", "negative duration", "late_grace = \"-5m\"\n", `cryochamber: cryo.toml:1: late_grace: duration "-5m" must be positive`},
	{"config", "max_retries 99", "max_retries = 99\n", "cryochamber: cryo.toml:1: max_retries: must be between 0 and 10, not 99"},
	{"config", "unknown time zone", "timezone = \"Mars/Olympus\"\n", `cryochamber: cryo.toml:1: timezone: unknown time zone "Mars/Olympus"`},
	{"config", "unknown backend", "backend = \"cron\"\n", `cryochamber: cryo.toml:1: backend: unknown backend "cron" (want "systemd", "launchd" or "slurm")`},
	{"config", "slurm option that sets the job's command", "backend = \"slurm\"\n\n[slurm]\nextra_args = [\"--wrap=id\"]\n", `cryochamber: cryo.toml:4: slurm.extra_args: sbatch option "--wrap=id": cryochamber sets --wrap itself`},
	{"config", "bad size", "min_free_disk = \"lots\"\n", `cryochamber: cryo.toml:1: min_free_disk: "lots" is not a size`},
	{"config", "quiet hours without minutes", "quiet_hours = \"22-7\"\n", `cryochamber: cryo.toml:1: quiet_hours: "22-7" is not a range of hours (want "HH:MM-HH:MM", such as "22:00-07:00")`},
	{"config", "stop_after in words", "stop_after = \"next June\"\n", `cryochamber: cryo.toml:1: stop_after: "next June" is not a date or an instant`},
	{"config", "max_sessions_per_day 0", "max_sessions_per_day = 0\n", "cryochamber: cryo.toml:1: max_sessions_per_day: must be at least 1, not 0"},
	{"config", "a budget of 0", "budget_per_day = 0\n", "cryochamber: cryo.toml:1: budget_per_day: must be an amount in USD above 0"},
	// Issue 27: the snapshot keys.
	{"config", "bad snapshot_keep", "snapshot_keep = \"forever\"\n", `cryochamber: cryo.toml:1: snapshot_keep: "forever" is not a retention`},
	{"config", "snapshot_keep under a day", "snapshot_keep = \"2h\"\n", "cryochamber: cryo.toml:1: snapshot_keep: must be at least a day"},
	{"config", "bad snapshot_exclude glob", "snapshot_exclude = [\"[a-\"]\n", `cryochamber: cryo.toml:1: snapshot_exclude: "[a-" is not a glob`},
	{"config", "agent with shell syntax", "agent = \"opencode; rm -rf ~\"\n", `cryochamber: cryo.toml:1: agent: unquoted ";" is shell syntax`},
	{"config", "custom agent without command", "[agents.bot]\nstdin = true\n", "cryochamber: cryo.toml: agents.bot.command: is required for an agent that is not a preset"},
	{"config", "bad [[fallback]] action", "[[fallback]]\naction = \"sms\"\ntarget = \"1\"\n", `cryochamber: cryo.toml: fallback[0].action: unknown action "sms"`},
	{"config", "email fallback without [email]", "[[fallback]]\naction = \"email\"\ntarget = \"a@b.c\"\n", "cryochamber: cryo.toml: fallback[0]: an email fallback needs an [email] table"},
	{"config", "bad TLS policy", "[email]\nhost = \"h\"\nfrom = \"a@b\"\ntls = \"ssl\"\n", `cryochamber: cryo.toml:4: email.tls: unknown TLS policy "ssl"`},
	{"config", "username without password source", "[email]\nhost = \"h\"\nfrom = \"a@b\"\nusername = \"u\"\n", "cryochamber: cryo.toml:4: email.username: needs password_env or password_command"},
	{"config", "TOML syntax error", "agent = \n", "cryochamber: cryo.toml:1: unexpected character U+000A at start of value"},
	{"config", "wrong type", "watch_inbox = \"yes\"\n", "cryochamber: cryo.toml:1: watch_inbox: cannot decode TOML string"},
	{"config", "not UTF-8", "agent = \"\xff\"\n", "cryochamber: cryo.toml: not valid UTF-8 text"},

	// Message files dropped into messages/inbox/: the next session's prompt says so.
	{"message", "front matter not closed", "---\nfrom: a\n", "(this message could not be read: m.md:2: front matter not closed with ---)"},
	{"message", "front matter line without colon", "---\nfrom a\n---\n", "(this message could not be read: m.md:2: want `key: value` in the front matter, got \"from a\")"},
	{"message", "duplicate header", "---\nfrom: a\nfrom: b\n---\n", `(this message could not be read: m.md:3: duplicate key "from")`},
	{"message", "bad time", "---\ntime: yesterday\n---\n", `(this message could not be read: m.md:2: time "yesterday" is not RFC 3339)`},
	{"message", "unknown kind", "---\nkind: spam\n---\n", `(this message could not be read: m.md:2: unknown kind "spam")`},
	{"message", "escape sequence in subject", "---\nsubject: a\x1b[2Jb\n---\n", "(this message could not be read: m.md:2: subject: contains a control character (U+001B))"},
	{"message", "binary garbage", "\x00\x01\x02\xff", "(this message could not be read: m.md: not valid UTF-8)"},

	// The chamber's private state, STATE/state.json (written atomically; these are hand edits or
	// disk damage), read by status. timer.json in the chamber is only a view for the agent.
	{"state", "truncated JSON", "{\"version\": 1, \"phase\": \"arm", "cryochamber: STATE/state.json: not valid JSON (unexpected end of JSON input)"},
	{"state", "empty file", "", "cryochamber: STATE/state.json: not valid JSON (unexpected end of JSON input)"},
	{"state", "unknown phase", "{\"version\": 1, \"phase\": \"sleeping\"}", `cryochamber: STATE/state.json: unknown phase "sleeping"`},
	{"state", "future version", "{\"version\": 9, \"phase\": \"armed\"}", "cryochamber: STATE/state.json: version 9 is not 1"},
	{"state", "armed without a wake", "{\"version\": 1, \"phase\": \"armed\"}", "cryochamber: STATE/state.json: phase armed without a wake time"},
	{"state", "negative session", "{\"version\": 1, \"phase\": \"complete\", \"session\": -1}", "cryochamber: STATE/state.json: negative session number -1"},

	// cryo.log as the next command finds it after session 1 died: a corrupt log is moved
	// aside; a torn block is closed as crashed.
	{"log", "binary garbage", "\x00\x01\x02garbage\xff\xfe\n\x00", `cryochamber: warning: cryo.log could not be used (CHAMBER/cryo.log: corrupt session log at byte 13: NUL byte in torn line "\x00") and was moved aside to cryo.log.corrupt-<time>`},
	{"log", "NUL bytes at the end", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\n\x00\x00\x00\n", `cryochamber: warning: cryo.log could not be used (CHAMBER/cryo.log: corrupt session log at byte 44: NUL byte in line "\x00\x00\x00")`},
	{"log", "hand-edited line inside a block", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\nI edited this\n--- CRYO END 1 2026-11-22T10:00:05Z exit=0 ---\n", `cryochamber: warning: cryo.log could not be used (CHAMBER/cryo.log: corrupt session log at byte 44: line "I edited this" is not a SESSION, END,`},
	{"log", "END number does not match", "--- CRYO SESSION 2 2026-11-22T10:00:00Z ---\n| x\n--- CRYO END 3 2026-11-22T10:00:05Z exit=0 ---\n", "cryochamber: warning: cryo.log could not be used (CHAMBER/cryo.log: corrupt session log at byte 48: END line of session 3 closes the block of session 2)"},
	{"log", "malformed SESSION line", "--- CRYO SESSION two 2026-11-22T10:00:00Z ---\n", `cryochamber: warning: cryo.log could not be used (CHAMBER/cryo.log: corrupt session log at byte 0: malformed SESSION line`},
	{"log", "cut in the middle of a UTF-8 character", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\n| caf\xc3", "recovering: session 1 crashed (its process died); closed its block as failed"},
	{"log", "cut after the SESSION line", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\n| working\n", "recovering: session 1 crashed (its process died); closed its block as failed"},
}

func manyFallbacks(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[CRYO:FALLBACK email a%d@b.c \"m\"]\n", i)
	}
	return b.String()
}

// catalogueAgent prints out.txt when there is one (the markers under test), else a good ending;
// it keeps its prompt, where cryochamber shows the inbox messages.
const catalogueAgent = `#!/bin/sh
for last; do :; done
printf '%s\n' "$last" > prompt.txt
if [ -e out.txt ]; then cat out.txt; else echo "[CRYO:EXIT 0] ok"; echo "[CRYO:WAKE +1h]"; fi
`

// catalogueConfig is the chamber's cryo.toml: times read in Europe/Berlin; no retries, so a
// failed session ends the chamber instead of arming a retry.
const catalogueConfig = "agent = \"./agent.sh\"\ntimezone = \"Europe/Berlin\"\nmax_retries = 0\nwatch_inbox = false\n"

// answer feeds a bad input to the built cryochamber the way it arrives in a real run, and
// returns what the binary printed about it (see answerLines), with the chamber's path written
// CHAMBER, its private state directory STATE, and timestamps <time>.
func answer(t *testing.T, m *systemdtest.Manager, env []string, b badInput) string {
	dir := filepath.Join(t.TempDir(), "chamber")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("plan.md", "x\n", 0o644)
	write("cryo.toml", catalogueConfig, 0o644)
	write("agent.sh", catalogueAgent, 0o755)
	start := func(env []string) (int, string) {
		return binSplit(t, env, dir, "start", filepath.Join(dir, "plan.md"))
	}
	mustStart := func(env []string) {
		t.Helper()
		if code, out := start(env); code != 0 {
			t.Fatalf("start: exit %d\n%s", code, out)
		}
	}
	var code int
	var out string
	extra := ""
	switch b.area {
	case "marker": // what the agent prints
		write("out.txt", b.input, 0o644)
		code, out = start(env)
	case "time": // a WAKE at that time
		write("out.txt", "[CRYO:EXIT 0] x\n[CRYO:WAKE "+b.input+"]\n", 0o644)
		code, out = start(env)
	case "command": // the next command, as a CMD
		write("out.txt", "[CRYO:EXIT 0] x\n[CRYO:WAKE +1h]\n[CRYO:CMD "+b.input+"]\n", 0o644)
		code, out = start(env)
	case "config": // cryo.toml as the operator wrote it
		write("cryo.toml", b.input, 0o644)
		code, out = start(env)
	case "message": // a file dropped into the inbox, read by the next session
		mustStart(env)
		write("messages/inbox/m.md", b.input, 0o644)
		code, out = binSplit(t, env, dir, "wake", "--dir", dir, "--now")
		prompt, _ := os.ReadFile(filepath.Join(dir, "prompt.txt"))
		for _, l := range strings.Split(string(prompt), "\n") {
			if strings.Contains(l, "could not be read") {
				extra = "the prompt shows: " + strings.TrimPrefix(strings.TrimSpace(l), "> ")
			}
		}
	case "state": // the chamber's private state on disk (damage, a hand edit), read by status
		mustStart(env)
		if err := os.WriteFile(chamber.StatePath(fixture.StateDir(m), dir), []byte(b.input), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out = binSplit(t, env, dir, "status", "--dir", dir)
	case "log": // cryo.log on disk when the next command comes: session 1 died after its
		// SESSION line (a real crash, at offset 0), and the log now holds the input
		if code, out := start(append(append([]string(nil), env...), "CRYOCHAMBER_CRASH_AT=header")); code != -9 {
			t.Fatalf("start with a crash: exit %d\n%s", code, out)
		}
		write("cryo.log", b.input, 0o600)
		code, out = binSplit(t, env, dir, "wake", "--dir", dir)
	default:
		t.Fatalf("unknown area %q", b.area)
	}
	lines := answerLines(code, out)
	if extra != "" {
		lines = append(lines, extra)
	}
	got := strings.Join(lines, "\n")
	got = strings.ReplaceAll(got, filepath.Dir(chamber.StatePath(fixture.StateDir(m), dir)), "STATE")
	got = strings.ReplaceAll(got, dir, "CHAMBER")
	got = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`).ReplaceAllString(got, "<time>")
	return regexp.MustCompile(`\d{8}T\d{6}Z`).ReplaceAllString(got, "<time>")
}

// answerLines picks what the binary said about the input out of everything it printed: the
// error and its hint (standard error, "cryochamber: ..." and "hint: ..."), how the session ended
// ("session 1: EXIT 0 ..." or "... failed ..."), the recovery of the log, and, when the run went
// on (exit 0), the validation steps that warned; and every warning, except those about this
// machine ("lingering is off") or the test's own crash ("took over the lock"). out is standard
// output, then "--- stderr ---", then standard error.
func answerLines(code int, out string) []string {
	keep := []*regexp.Regexp{
		regexp.MustCompile(`^session \d+: (EXIT|failed)`),
		regexp.MustCompile(`^warning: `),
		regexp.MustCompile(`^recovering: `),
		regexp.MustCompile(`^cryochamber: `),
		regexp.MustCompile(`^hint: `),
	}
	if code == 0 {
		keep = append(keep, regexp.MustCompile(`^step \d+ .*  WARN  `))
	}
	skip := regexp.MustCompile(`^(cryochamber: )?warning: (lingering is off|took over the lock)`)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if skip.MatchString(l) {
			continue
		}
		for _, re := range keep {
			if re.MatchString(l) {
				l = regexp.MustCompile(`after \d+(\.\d+)?(µs|ms|s)\b`).ReplaceAllString(l, "after <duration>")
				lines = append(lines, strings.Join(strings.Fields(l), " "))
				break
			}
		}
	}
	return lines
}

// binSplit runs the binary like bin, and returns its standard output, then standard error
// after a "--- stderr ---" line.
func binSplit(t *testing.T, env []string, dir string, args ...string) (int, string) {
	t.Helper()
	r := fixture.Run(t, env, dir, args...)
	return r.Code, r.Stdout + "--- stderr ---\n" + r.Stderr
}

func TestBadInputCatalogue(t *testing.T) {
	t.Parallel()
	if len(catalogue) < 60 {
		t.Fatalf("the catalogue has %d entries; the promise is at least 60", len(catalogue))
	}
	m := systemdtest.Start(t)
	env := fixture.Env(m)
	answers := make([]string, len(catalogue))
	t.Run("inputs", func(t *testing.T) {
		for i, b := range catalogue {
			t.Run(b.area+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				got := answer(t, m, env, b)
				answers[i] = got
				switch {
				case got == "":
					t.Errorf("accepted without a word, want %q", b.want)
				case !strings.Contains(got, b.want) && !strings.Contains(got, refused+b.want):
					t.Errorf("answer\n%s\ndoes not contain %q", got, b.want)
				}
			})
		}
	})
	var doc bytes.Buffer
	doc.WriteString("# Bad inputs\n\nGenerated by `go test ./internal/e2e/binary -run TestBadInputCatalogue -update` (as root: it runs the built\n" +
		"binary under a private systemd user manager) from the table in `catalogue_test.go`. Each input\n" +
		"reaches `cryochamber` the way it would in a real run: as what the agent printed (markers; times\n" +
		"in a WAKE, commands in a CMD), as cryo.toml, as a file in the inbox, as the chamber's state\n" +
		"(STATE: its private state directory) or cryo.log found on disk. The right column is what the\n" +
		"binary printed about it (the chamber's path written CHAMBER): the error and its hint,\n" +
		"a failed session, the warnings of a run that went on, what the agent's prompt shows. Markers\n" +
		"and times are read in the zone Europe/Berlin; a marker's line number is its line in the\n" +
		"session's block (`cryochamber log --numbers`), where the agent's output starts at line 5.\n\n")
	fmt.Fprintf(&doc, "%d inputs.\n", len(catalogue))
	area := ""
	for i, b := range catalogue {
		if b.area != area {
			area = b.area
			fmt.Fprintf(&doc, "\n## %s\n\n| input | what cryochamber says |\n|---|---|\n", area)
		}
		fmt.Fprintf(&doc, "| %s: `%s` | %s |\n", b.name, mdCode(b.input), mdText(answers[i]))
	}
	if t.Failed() {
		return
	}
	path := filepath.Join(fixture.Repo(t), "docs", "BAD-INPUTS.md")
	if *update {
		if err := os.WriteFile(path, doc.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(have, doc.Bytes()) {
		t.Fatalf("%s is out of date: run go test -run TestBadInputCatalogue -update .", path)
	}
}

// mdCode shows an input in a table cell: escapes, and long inputs shortened.
func mdCode(s string) string {
	q := fmt.Sprintf("%q", s)
	q = q[1 : len(q)-1]
	if len(q) > 90 {
		q = q[:60] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return strings.ReplaceAll(strings.ReplaceAll(q, "|", `\|`), "`", "'")
}

// mdText shows the binary's lines in a table cell, one per line, each cut to 240 bytes.
func mdText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if len(l) > 240 {
			l = l[:240] + "…"
		}
		l = strings.ReplaceAll(l, "|", `\|`)
		lines[i] = strings.ReplaceAll(strings.ReplaceAll(l, "<", "&lt;"), ">", "&gt;")
	}
	return strings.Join(lines, "<br>")
}
