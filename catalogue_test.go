package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/message"
	"github.com/cryochamber/cryochamber/sessionlog"
)

// badInput is one entry of the catalogue: an input from one area and the message (substring)
// cryochamber must answer with. want "torn" means: not an error, a torn block that the next
// command closes as crashed.
type badInput struct {
	area, name, input, want string
}

var berlin, _ = time.LoadLocation("Europe/Berlin")

// catalogue lists every bad input we promise to handle with a clear message. Each area's inputs
// are fed to the function that reads that kind of input in a real run.
var catalogue = []badInput{
	// Markers (marker.Parse on the agent's standard output; line numbers are the output's).
	{"marker", "no EXIT at all", "did the work\n", "no EXIT"},
	{"marker", "EXIT 7", "[CRYO:EXIT 7] hmm\n", `line 1: EXIT "7": code must be 0, 1 or 2`},
	{"marker", "EXIT with no code", "[CRYO:EXIT] done\n", "line 1: EXIT"},
	{"marker", "EXIT -1", "[CRYO:EXIT -1] x\n", `EXIT "-1": code must be 0, 1 or 2`},
	{"marker", "EXIT 07", "[CRYO:EXIT 07] x\n", `EXIT "07": code must be 0, 1 or 2`},
	{"marker", "unclosed marker", "[CRYO:EXIT 0] ok\n[CRYO:WAKE +1h\n", "line 2:"},
	{"marker", "WAKE banana", "[CRYO:EXIT 0] x\n[CRYO:WAKE banana]\n", `line 2: WAKE "banana": not a time`},
	{"marker", "empty WAKE", "[CRYO:EXIT 0] x\n[CRYO:WAKE]\n", "line 2: WAKE"},
	{"marker", "unknown FALLBACK action", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK sms 555 \"m\"]\n", `unknown FALLBACK action "sms" (want email or webhook)`},
	{"marker", "FALLBACK message unquoted", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK email a@b.c help]\n", "line 2: FALLBACK"},
	{"marker", "FALLBACK bad email", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK email not-an-address \"m\"]\n", "line 2: FALLBACK"},
	{"marker", "FALLBACK webhook to ftp", "[CRYO:EXIT 0] x\n[CRYO:FALLBACK webhook ftp://x/y \"m\"]\n", "line 2: FALLBACK"},
	{"marker", "empty CMD", "[CRYO:EXIT 0] x\n[CRYO:CMD ]\n", "line 2: CMD"},
	{"marker", "CMD with ;", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode; rm -rf ~]\n", "line 2: CMD"},
	{"marker", "CMD with $(...)", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode $(curl evil)]\n", "line 2: CMD"},
	{"marker", "CMD with backticks", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode `id`]\n", "line 2: CMD"},
	{"marker", "CMD with a redirection", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode > /etc/passwd]\n", "line 2: CMD"},
	{"marker", "CMD with a pipe", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode | sh]\n", "line 2: CMD"},
	{"marker", "CMD with an unterminated quote", "[CRYO:EXIT 0] x\n[CRYO:CMD opencode \"half]\n", "line 2:"},
	{"marker", "empty PLAN", "[CRYO:EXIT 0] x\n[CRYO:PLAN ]\n", "line 2: PLAN"},
	{"marker", "REPLY unquoted", "[CRYO:EXIT 0] x\n[CRYO:REPLY hello]\n", "line 2: REPLY"},
	{"marker", "TODO without text", "[CRYO:EXIT 0] x\n[CRYO:TODO +1d]\n", "line 2: TODO"},
	{"marker", "TODO with a bad time", "[CRYO:EXIT 0] x\n[CRYO:TODO tomorrow \"x\"]\n", "line 2: TODO"},
	{"marker", "control character in a summary", "[CRYO:EXIT 0] ok\x1b[31m\n", "line 1:"},
	{"marker", "invalid UTF-8 in a marker", "[CRYO:EXIT 0] ok\n[CRYO:PLAN \xff\xfe]\n", "line 2:"},
	{"marker", "a line over 1 MiB", "[CRYO:EXIT 0] ok\n" + strings.Repeat("x", 1<<20+1) + "\n", "line 2:"},
	{"marker", "17 FALLBACKs", "[CRYO:EXIT 0] x\n" + manyFallbacks(17), "FALLBACK"},

	// Times (WAKE and TODO), in the chamber's zone (Europe/Berlin here).
	{"time", "February 30th", "2031-02-30T09:00", "day"},
	{"time", "hour 24", "2031-03-01T24:00", "hour"},
	{"time", "minute 60", "2031-03-01T09:60", "minute"},
	{"time", "year 2200 (systemd's calendar ends in 2199)", "2200-01-01T00:00Z", "2199"},
	{"time", "year 1969", "1969-12-31T23:59Z", "1970"},
	{"time", "offset without minutes", "2031-03-01T09:00+01", "not a time (want 2026-03-08T09:00"},
	{"time", "offset +25:00", "2031-03-01T09:00+25:00", "offset"},
	{"time", "relative zero", "+0m", "relative time must be more than zero"},
	{"time", "relative without unit", "+45", "missing unit after 45 (want w, d, h, m or s)"},
	{"time", "relative units out of order", "+30m1h", "units must come in the order w, d, h, m, s"},
	{"time", "relative unit twice", "+1h1h", "each at most once"},
	{"time", "relative over 100 years", "+5300w", "100 years"},
	{"time", "date only", "2031-03-01", "not a time"},
	{"time", "a word", "tomorrow", "not a time"},

	// Command lines (CMD, and the agent line in cryo.toml).
	{"command", "unquoted ;", "opencode; rm", `unquoted ";" is shell syntax, but no shell runs this command`},
	{"command", "unquoted &&", "a && b", `unquoted "&" is shell syntax`},
	{"command", "unquoted $VAR", "opencode $HOME", `unquoted "$" is shell syntax`},
	{"command", "unquoted ( )", "a (b)", `unquoted "(" is shell syntax`},
	{"command", "unterminated single quote", "a 'b", "unterminated"},
	{"command", "unterminated double quote", "a \"b", "unterminated"},

	// cryo.toml (strict: the message names the file and the line).
	{"config", "unknown key", "agent = \"claude\"\nsesion_timeout = \"1h\"\n", `cryo.toml:2: unknown key "sesion_timeout"`},
	{"config", "unknown key in [email]", "[email]\nhost = \"h\"\nfrom = \"a@b\"\npasword_env = \"X\"\n", `cryo.toml:4: unknown key "email.pasword_env"`},
	{"config", "bad duration", "session_timeout = \"2 hours\"\n", `cryo.toml:1: session_timeout: "2 hours" is not a duration`},
	{"config", "duration without unit", "late_grace = 600\n", "cryo.toml:1: late_grace: 600 has no unit"},
	{"config", "negative duration", "late_grace = \"-5m\"\n", "must be positive"},
	{"config", "max_retries 99", "max_retries = 99\n", "cryo.toml:1: max_retries: must be between 0 and 10, not 99"},
	{"config", "unknown time zone", "timezone = \"Mars/Olympus\"\n", `cryo.toml:1: timezone: unknown time zone "Mars/Olympus"`},
	{"config", "unknown backend", "backend = \"cron\"\n", `backend: unknown backend "cron"`},
	{"config", "bad size", "min_free_disk = \"lots\"\n", `"lots" is not a size`},
	{"config", "agent with shell syntax", "agent = \"opencode; rm -rf ~\"\n", "cryo.toml:1: agent:"},
	{"config", "custom agent without command", "[agents.bot]\nstdin = true\n", "agents.bot.command: is required"},
	{"config", "bad [[fallback]] action", "[[fallback]]\naction = \"sms\"\ntarget = \"1\"\n", `fallback[0].action: unknown action "sms"`},
	{"config", "email fallback without [email]", "[[fallback]]\naction = \"email\"\ntarget = \"a@b.c\"\n", "needs an [email] table"},
	{"config", "bad TLS policy", "[email]\nhost = \"h\"\nfrom = \"a@b\"\ntls = \"ssl\"\n", `email.tls: unknown TLS policy "ssl"`},
	{"config", "username without password source", "[email]\nhost = \"h\"\nfrom = \"a@b\"\nusername = \"u\"\n", "email.username: needs password_env or password_command"},
	{"config", "TOML syntax error", "agent = \n", "cryo.toml:1"},
	{"config", "wrong type", "watch_inbox = \"yes\"\n", "cryo.toml:1"},
	{"config", "not UTF-8", "agent = \"\xff\"\n", "cryo.toml: not valid UTF-8"},

	// Message files dropped into messages/inbox/.
	{"message", "front matter not closed", "---\nfrom: a\n", "m.md:2: front matter not closed with ---"},
	{"message", "front matter line without colon", "---\nfrom a\n---\n", "m.md:2: want `key: value`"},
	{"message", "duplicate header", "---\nfrom: a\nfrom: b\n---\n", `m.md:3: duplicate key "from"`},
	{"message", "bad time", "---\ntime: yesterday\n---\n", `m.md:2: time "yesterday" is not RFC 3339`},
	{"message", "unknown kind", "---\nkind: spam\n---\n", `m.md:2: unknown kind "spam"`},
	{"message", "escape sequence in subject", "---\nsubject: a\x1b[2Jb\n---\n", "m.md:2: subject: contains a control character"},
	{"message", "binary garbage", "\x00\x01\x02\xff", "m.md: not valid UTF-8"},

	// timer.json (written atomically; these are hand edits or disk damage).
	{"state", "truncated JSON", "{\"version\": 1, \"phase\": \"arm", "not valid JSON"},
	{"state", "empty file", "", "not valid JSON"},
	{"state", "unknown phase", "{\"version\": 1, \"phase\": \"sleeping\"}", `unknown phase "sleeping"`},
	{"state", "future version", "{\"version\": 9, \"phase\": \"armed\"}", "version 9 is not 1"},
	{"state", "armed without a wake", "{\"version\": 1, \"phase\": \"armed\"}", "phase armed without a wake time"},
	{"state", "negative session", "{\"version\": 1, \"phase\": \"complete\", \"session\": -1}", "negative session number"},

	// cryo.log (the latest block is read from the end; a corrupt log is moved aside).
	{"log", "binary garbage", "\x00\x01\x02garbage\xff\xfe\n\x00", "corrupt"},
	{"log", "NUL bytes at the end", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\n\x00\x00\x00\n", "corrupt"},
	{"log", "hand-edited line inside a block", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\nI edited this\n--- CRYO END 1 2026-11-22T10:00:05Z exit=0 ---\n", "corrupt"},
	{"log", "END number does not match", "--- CRYO SESSION 2 2026-11-22T10:00:00Z ---\n| x\n--- CRYO END 3 2026-11-22T10:00:05Z exit=0 ---\n", "corrupt"},
	{"log", "malformed SESSION line", "--- CRYO SESSION two 2026-11-22T10:00:00Z ---\n", "corrupt"},
	{"log", "cut in the middle of a UTF-8 character", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\n| caf\xc3", "torn"},
	{"log", "cut after the SESSION line", "--- CRYO SESSION 1 2026-11-22T10:00:00Z ---\n| working\n", "torn"},
}

func manyFallbacks(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[CRYO:FALLBACK email a%d@b.c \"m\"]\n", i)
	}
	return b.String()
}

// answer feeds a bad input to what reads it in a real run and returns the message.
func answer(t *testing.T, b badInput) string {
	switch b.area {
	case "marker":
		res, err := marker.Parse(strings.NewReader(b.input), berlin)
		if err != nil {
			return err.Error()
		}
		var msgs []string
		for _, e := range res.Errors {
			msgs = append(msgs, e.Error())
		}
		if res.Exit == nil && len(res.Errors) == 0 {
			msgs = append(msgs, "no EXIT marker: the session counts as failed (exit 2) and is retried")
		}
		return strings.Join(msgs, "; ")
	case "time":
		if _, err := marker.ParseTime(b.input, berlin); err != nil {
			return err.Error()
		}
	case "command":
		if _, err := marker.SplitCommand(b.input); err != nil {
			return err.Error()
		}
	case "config":
		if _, err := chamber.ParseConfig("/chamber/cryo.toml", []byte(b.input), time.UTC); err != nil {
			return err.Error()
		}
	case "message":
		if _, err := message.Parse("m.md", []byte(b.input)); err != nil {
			return err.Error()
		}
	case "state":
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, chamber.StateFile), []byte(b.input), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := chamber.ReadStateFile(filepath.Join(dir, chamber.StateFile)); err != nil {
			return err.Error()
		}
	case "log":
		p := filepath.Join(t.TempDir(), chamber.LogFile)
		if err := os.WriteFile(p, []byte(b.input), 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := sessionlog.Latest(p, -1)
		switch {
		case errors.Is(err, sessionlog.ErrCorrupt):
			return "corrupt: " + err.Error()
		case err != nil:
			return err.Error()
		case info.End == nil:
			if _, err := sessionlog.CloseTorn(p, time.Now()); err != nil {
				return "torn, and closing it failed: " + err.Error()
			}
			if info2, err := sessionlog.Latest(p, -1); err != nil || info2.End == nil || info2.End.Reason != "crashed" {
				return fmt.Sprintf("torn, but not closed as crashed: %+v %v", info2, err)
			}
			return "torn: the next command closes the block as crashed (exit=2 reason=crashed)"
		}
	default:
		t.Fatalf("unknown area %q", b.area)
	}
	return ""
}

// stableAnswer replaces the temporary directory in a message, so the docs are reproducible.
func stableAnswer(t *testing.T, b badInput) string {
	got := answer(t, b)
	tmp := regexp.QuoteMeta(filepath.Clean(os.TempDir()))
	return regexp.MustCompile(tmp+`/TestBadInputCatalogue\d+/\d+/`).ReplaceAllString(got, "CHAMBER/")
}

func TestBadInputCatalogue(t *testing.T) {
	if len(catalogue) < 60 {
		t.Fatalf("the catalogue has %d entries; the promise is at least 60", len(catalogue))
	}
	var doc bytes.Buffer
	doc.WriteString("# Bad inputs\n\nGenerated by `go test -run TestBadInputCatalogue -update .` from the table in\n" +
		"`catalogue_test.go`: each input is fed to the code that reads it in a real run, and the test\n" +
		"checks the answer. Markers and times are read in the zone Europe/Berlin.\n\n")
	fmt.Fprintf(&doc, "%d inputs.\n", len(catalogue))
	area := ""
	for _, b := range catalogue {
		got := stableAnswer(t, b)
		if got == "" {
			t.Errorf("%s / %s: accepted, want %q", b.area, b.name, b.want)
			continue
		}
		if !strings.Contains(got, b.want) {
			t.Errorf("%s / %s: answer %q does not contain %q", b.area, b.name, got, b.want)
		}
		if b.area != area {
			area = b.area
			fmt.Fprintf(&doc, "\n## %s\n\n| input | what cryochamber says |\n|---|---|\n", area)
		}
		fmt.Fprintf(&doc, "| %s: `%s` | %s |\n", b.name, mdCode(b.input), mdText(got))
	}
	path := filepath.Join("docs", "BAD-INPUTS.md")
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

func mdText(s string) string {
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
