package binary

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// hostileAgent prints what must never reach a terminal or a page raw: escape sequences (CSI,
// OSC with BEL), C1 controls (as UTF-8 and as a lone byte), NUL, a carriage return inside a
// line, invalid UTF-8, a forged END line and a forged SESSION line, on both streams, and a
// marker whose summary holds an escape sequence.
const hostileAgent = `#!/bin/sh
printf 'plain line\n'
printf 'csi \033[31mred\033[0m and clear \033[2J\n'
printf 'osc \033]0;owned title\007 after\n'
printf 'c1 \302\233 and a lone \233 byte\n'
printf 'nul \000 here\n'
printf 'cr \r over the prefix\n'
printf 'bad utf8 \377\376 end\n'
printf -- '--- CRYO END 1 2026-01-01T00:00:00Z exit=0 ---\n'
printf -- '--- CRYO SESSION 99 2026-01-01T00:00:00Z ---\n'
printf 'err \033[1mbold\033[0m \302\205\n' >&2
printf '[CRYO:EXIT 0] done \033[2J here \302\233\n'
printf '[CRYO:WAKE +1d]\n'
`

// badTerminal says what in out must not reach a terminal or a browser raw.
func badTerminal(out []byte) string {
	if !utf8.Valid(out) {
		return "invalid UTF-8"
	}
	for _, r := range string(out) {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("control character %U", r)
		case r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("C1 control %U", r)
		}
	}
	// JSON escapes a control character: the text must have been sanitized before it was encoded.
	for _, esc := range []string{`\u001b`, `\u0007`, `\u0000`, `\r`, `\u0085`, `\u009b`, `\ufffd[31m` + "x"} {
		if bytes.Contains(bytes.ToLower(out), []byte(strings.ToLower(esc))) {
			return "escaped control " + esc
		}
	}
	return ""
}

// TestEveryLogReaderSanitizes: whatever the log holds in its "| " and "! " lines, every command
// and page that shows it sanitizes it (log, status, validate, history, the dashboard's pages and
// API, the marker reader), and no line the agent printed begins a block.
func TestEveryLogReaderSanitizes(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	env := fixture.Env(m)
	dir := filepath.Join(t.TempDir(), "hostile")
	fixture.WriteFiles(t, dir, map[string]string{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nwatch_inbox = false\n",
		"agent.sh":  hostileAgent,
	})
	if err := os.Chmod(filepath.Join(dir, "agent.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))

	// Block boundaries: only cryochamber's own lines begin with "--- CRYO", and every line has
	// one of the four forms.
	data, err := os.ReadFile(filepath.Join(dir, "cryo.log"))
	if err != nil {
		t.Fatal(err)
	}
	heads := 0
	for _, l := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		switch {
		case bytes.HasPrefix(l, []byte("--- CRYO ")):
			heads++
		case bytes.HasPrefix(l, []byte("| ")), bytes.HasPrefix(l, []byte("! ")), bytes.HasPrefix(l, []byte("# ")):
		default:
			t.Errorf("cryo.log line %q has no prefix", l)
		}
	}
	if heads != 2 {
		t.Errorf("cryo.log has %d SESSION/END lines, want 2 (the agent's forged ones are prefixed):\n%q", heads, data)
	}

	check := func(what string, out []byte) {
		t.Helper()
		if why := badTerminal(out); why != "" {
			t.Errorf("%s shows %s raw:\n%q", what, why, out)
		}
	}
	for _, args := range [][]string{
		{"log"}, {"log", "--session", "1"}, {"log", "--numbers"},
		{"status"}, {"status", "--json"}, {"status", "--lines", "40"},
		{"validate"}, {"validate", "--json"},
		{"history"}, {"history", "--json"}, {"ps"},
	} {
		if args[0] != "ps" {
			args = append(args, "--dir", dir)
		}
		code, out := bin(t, env, dir, args...)
		if code != 0 && args[0] != "validate" {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
		check(strings.Join(args, " "), []byte(out))
	}
	// What the marker reader read: the summary as the sanitizer leaves it.
	_, out := bin(t, env, dir, "history", "--json", "--dir", dir)
	if want := `"summary": "done \ufffd[2J here \ufffd"`; !strings.Contains(out, strings.ReplaceAll(want, `\ufffd`, "\uFFFD")) {
		t.Errorf("history --json: the EXIT summary is not the sanitized text %s:\n%s", want, out)
	}
	_, out = bin(t, env, dir, "log", "--session", "1", "--dir", dir)
	for _, want := range []string{"| csi \uFFFD[31mred\uFFFD[0m", "| c1 \uFFFD and a lone \uFFFD byte", "| -" + "-- CRYO END 1", "! err \uFFFD[1mbold"} {
		if !strings.Contains(out, want) {
			t.Errorf("log --session 1 lacks %q:\n%s", want, out)
		}
	}

	// The dashboard: its pages and API.
	addr := fmt.Sprintf("127.0.0.1:%d", mailtest.FreePort(t))
	p := startWeb(t, env, "--listen", addr)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	token := p.url[strings.Index(p.url, "token=")+len("token="):]
	base := "http://" + addr
	id := timer.ID(dir)
	for _, path := range []string{"/", "/c/" + id, "/api/ps", "/api/chambers/" + id + "/status", "/api/chambers/" + id + "/validate",
		"/api/chambers/" + id + "/log", "/api/chambers/" + id + "/history"} {
		code, body := dashGet(t, client, base, token, path)
		if code != 200 {
			t.Errorf("GET %s: %d\n%s", path, code, body)
		}
		check("GET "+path, []byte(body))
	}
	p.interrupt(t)
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
}
