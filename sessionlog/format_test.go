package sessionlog

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseLine(t *testing.T) {
	t1 := time.Date(2026, 11, 22, 10, 0, 3, 0, time.UTC)
	good := []struct {
		line string
		want line
	}{
		{"--- CRYO SESSION 12 2026-11-22T10:00:03Z ---", line{kind: Header, n: 12, t: t1}},
		{"--- CRYO SESSION 1 2026-11-22T10:00:03Z ---", line{kind: Header, n: 1, t: t1}},
		{"--- CRYO END 12 2026-11-22T10:00:03Z exit=0 ---", line{kind: End, n: 12, t: t1}},
		{"--- CRYO END 12 2026-11-22T10:00:03Z exit=1 ---", line{kind: End, n: 12, t: t1, exit: 1}},
		{"--- CRYO END 3 2026-11-22T10:00:03Z exit=2 reason=crashed ---", line{kind: End, n: 3, t: t1, exit: 2, why: "crashed"}},
		{"--- CRYO END 3 2026-11-22T10:00:03Z exit=2 reason=agent-failed ---", line{kind: End, n: 3, t: t1, exit: 2, why: "agent-failed"}},
		{"| hello", line{kind: Stdout, text: []byte("hello")}},
		{"| ", line{kind: Stdout}},
		{"|", line{kind: Stdout}},
		{"! --- CRYO END 12 2026-11-22T10:00:03Z exit=0 ---", line{kind: Stderr, text: []byte("--- CRYO END 12 2026-11-22T10:00:03Z exit=0 ---")}},
		{"# task: x", line{kind: Meta, text: []byte("task: x")}},
		{"#", line{kind: Meta}},
		{"| tab\there é \uFFFD", line{kind: Stdout, text: []byte("tab\there é \uFFFD")}},
		// The agent's text is in the log as it printed it (readers sanitize it).
		{"| a\x00b\xff \x1b[2J\r", line{kind: Stdout, text: []byte("a\x00b\xff \x1b[2J\r")}},
		{"! \xc2\x9b", line{kind: Stderr, text: []byte("\xc2\x9b")}},
	}
	for _, tc := range good {
		got, why := parseLine([]byte(tc.line))
		if why != "" {
			t.Errorf("parseLine(%q): unexpected error %s", tc.line, why)
			continue
		}
		if got.kind != tc.want.kind || got.n != tc.want.n || !got.t.Equal(tc.want.t) || got.exit != tc.want.exit ||
			got.why != tc.want.why || string(got.text) != string(tc.want.text) {
			t.Errorf("parseLine(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}

	bad := []struct{ line, want string }{
		{"", "empty line"},
		{"hello", "is not a SESSION, END"},
		{"|x", "is not a SESSION, END"},
		{"  | x", "is not a SESSION, END"},
		{"--- CRYO START 1 2026-11-22T10:00:03Z ---", "is not a SESSION, END"},
		{"--- cryo session 1 2026-11-22T10:00:03Z ---", "is not a SESSION, END"},
		// cryochamber's own lines are sanitized text; the agent's ("| ", "! ") are raw (below).
		{"# a\x00b", "NUL byte"},
		{"# a\xffb", "invalid UTF-8"},
		{"--- CRYO SESSION 1 2026-11-22T10:00:03Z \xff---", "invalid UTF-8"},
		{"--- CRYO SESSION 1 2026-11-22T10:00:03Z", "does not end with"},
		{"--- CRYO SESSION 1 2026-11-22T10:00:03Z ---\r", "does not end with"},
		{"--- CRYO SESSION 1  2026-11-22T10:00:03Z ---", "want \"--- CRYO SESSION <n> <time> ---\""},
		{"--- CRYO SESSION 0 2026-11-22T10:00:03Z ---", "session number \"0\""},
		{"--- CRYO SESSION 012 2026-11-22T10:00:03Z ---", "session number \"012\""},
		{"--- CRYO SESSION +1 2026-11-22T10:00:03Z ---", "session number \"+1\""},
		{"--- CRYO SESSION -1 2026-11-22T10:00:03Z ---", "session number \"-1\""},
		{"--- CRYO SESSION 1234567890123456789 2026-11-22T10:00:03Z ---", "session number"},
		{"--- CRYO SESSION 1 2026-11-22 10:00:03 ---", "want \"--- CRYO SESSION"},
		{"--- CRYO SESSION 1 2026-11-22T10:00:03+01:00 ---", "is not RFC 3339 UTC with whole seconds"},
		{"--- CRYO SESSION 1 2026-11-22T10:00:03.5Z ---", "is not RFC 3339 UTC"},
		{"--- CRYO SESSION 1 2026-11-22T10:00Z ---", "is not RFC 3339 UTC"},
		{"--- CRYO SESSION 1 2026-13-22T10:00:03Z ---", "is not RFC 3339 UTC"},
		{"--- CRYO SESSION 1 2026-11-22t10:00:03z ---", "is not RFC 3339 UTC"},
		{"--- CRYO END 1 2026-11-22T10:00:03Z exit=3 ---", "\"exit=3\" is not exit=0, exit=1 or exit=2"},
		{"--- CRYO END 1 2026-11-22T10:00:03Z exit=00 ---", "is not exit=0"},
		{"--- CRYO END 1 2026-11-22T10:00:03Z ---", "want \"--- CRYO END <n> <time> exit="},
		{"--- CRYO END 1 2026-11-22T10:00:03Z exit=0 reason=crashed ---", "a reason goes with exit=2, not exit=0"},
		{"--- CRYO END 1 2026-11-22T10:00:03Z exit=2 reason=Crashed ---", "is not reason=<word>"},
		{"--- CRYO END 1 2026-11-22T10:00:03Z exit=2 why=crashed ---", "is not reason=<word>"},
		{"--- CRYO END 1 2026-11-22T10:00:03Z exit=2 reason= ---", "is not reason=<word>"},
		{"--- CRYO END 1 2026-11-22T10:00:03Z exit=2 reason=a b ---", "want \"--- CRYO END"},
		{"--- CRYO END x 2026-11-22T10:00:03Z exit=0 ---", "session number \"x\""},
	}
	for _, tc := range bad {
		_, why := parseLine([]byte(tc.line))
		if why == "" {
			t.Errorf("parseLine(%q) accepted a bad line", tc.line)
			continue
		}
		if !strings.Contains(why, tc.want) {
			t.Errorf("parseLine(%q) = %q, want it to contain %q", tc.line, why, tc.want)
		}
	}
}

func TestCheckTorn(t *testing.T) {
	ok := []string{
		"| half a line",
		"| cut in a character \xe2\x82", // € cut after two of its three bytes
		"| cut \xf0\x9f\x98",
		"| raw agent text: \x00 \xff \x1b[2J", // the agent's bytes as printed
		"! \xe2\x82 b",
		"! x",
		"#",
		"|",
		"-",
		"--- CRYO",
		"--- CRYO SESS",
		"--- CRYO SESSION 13 2026-11-22T10:0",
		"--- CRYO SESSION 13 2026-11-22T10:00:03Z ---", // whole, but its newline never landed
		"--- CRYO END 12 2026-11-22T10:04:51Z exit=0 --",
		"",
	}
	for _, s := range ok {
		if why := checkTorn([]byte(s)); why != "" {
			t.Errorf("checkTorn(%q) = %q, want accepted", s, why)
		}
	}
	bad := []struct{ line, want string }{
		{"# a\x00\x00\x00", "NUL byte in torn line"},
		{"# a\xff b", "invalid UTF-8 in torn line"},
		{"# a\xe2\x82 b", "invalid UTF-8 in torn line"}, // the cut is not at the end
		{"garbage", "is not the start of any line form"},
		{"--- CRYO FOO", "is not the start of any line form"},
		{"|x", "is not the start of any line form"},
		{"\x89PNG", "invalid UTF-8"},
	}
	for _, tc := range bad {
		why := checkTorn([]byte(tc.line))
		if !strings.Contains(why, tc.want) {
			t.Errorf("checkTorn(%q) = %q, want it to contain %q", tc.line, why, tc.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"tab\tkept", "tab\tkept"},
		{"bell\a", "bell\uFFFD"},
		{"esc\x1b[31mred", "esc\uFFFD[31mred"},
		{"nul\x00", "nul\uFFFD"},
		{"del\x7f", "del\uFFFD"},
		{"c1\u0085\u009b", "c1\uFFFD\uFFFD"},
		{"nbsp\u00a0ok", "nbsp\u00a0ok"},
		{"bad\xff\xfe\xfdrun", "bad\uFFFDrun"},         // one replacement per invalid run
		{"\xff\x01", "\uFFFD\uFFFD"},                   // a control ends the run
		{"cut\xe2\x82", "cut\uFFFD"},                   // truncated sequence
		{"cr\rin the middle", "cr\uFFFDin the middle"}, // a lone \r is a control
		{"literal \uFFFD kept", "literal \uFFFD kept"},
		{"emoji 😀 é 中", "emoji 😀 é 中"},
		{"surrogate \xed\xa0\x80", "surrogate \uFFFD"},
	} {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !utf8.ValidString(Sanitize(tc.in)) {
			t.Errorf("Sanitize(%q) is not valid UTF-8", tc.in)
		}
	}
}

// Feeding a line in pieces, holding back an unfinished sequence, gives the same result as
// feeding it whole.
func TestSanitizePiecewise(t *testing.T) {
	in := []byte("a\xe2\x82\xacb\xff\xfe\xf0\x9f\x98\x80c\x01\xc3\xa9\xe2\x82")
	whole := Sanitize(string(in))
	for cut := 0; cut <= len(in); cut++ {
		first := in[:cut]
		hold := incomplete(first)
		out, run := sanitizeAppend(nil, first[:len(first)-hold], false)
		rest := append(append([]byte{}, first[len(first)-hold:]...), in[cut:]...)
		out, _ = sanitizeAppend(out, rest, run)
		if string(out) != whole {
			t.Errorf("cut at %d: %q, want %q", cut, out, whole)
		}
	}
}

func TestFormatErrors(t *testing.T) {
	t1 := time.Date(2026, 11, 22, 10, 0, 3, 0, time.UTC)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"session 0", second(sessionLine(0, t1)), "must be at least 1"},
		{"year 10000", second(sessionLine(1, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))), "outside the years 1 to 9999"},
		{"exit 3", second(endLine(1, t1, 3, "")), "exit code 3: must be 0, 1 or 2"},
		{"exit -1", second(endLine(1, t1, -1, "")), "exit code -1"},
		{"reason with exit 0", second(endLine(1, t1, 0, "crashed")), "a reason goes with exit code 2"},
		{"reason not a word", second(endLine(1, t1, 2, "no exit")), "must be a word"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, tc.err, tc.want)
		}
	}
	// A local time is written in UTC, truncated to the second.
	zone := time.FixedZone("X", 5*3600+30*60)
	got, err := sessionLine(7, time.Date(2026, 11, 22, 15, 30, 3, 900_000_000, zone))
	if err != nil || got != "--- CRYO SESSION 7 2026-11-22T10:00:03Z ---" {
		t.Errorf("sessionLine = %q, %v", got, err)
	}
}

func second(_ string, err error) error { return err }
