package chamber

import (
	"strings"
	"testing"
	"time"
)

// TestConfigChanges: reload shows every changed key, old → new, with the defaults filled in,
// secrets hidden, a URL's token stripped, and says which changes need --yes. (Before, reload
// named only the top-level key: "changed: fallback".)
func TestConfigChanges(t *testing.T) {
	parse := func(s string) *Config {
		c, err := ParseConfig("cryo.toml", []byte(s), time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse(`agent = "./agent.sh"
session_timeout = "15s"
[[fallback]]
action = "webhook"
target = "http://127.0.0.1:1/hook"
[webhook]
secret_env = "HOOK_SECRET"
`)
	edited := parse(`agent = "codex"
allowed_commands = ["bash"]
timezone = "Europe/Paris"
[[fallback]]
action = "webhook"
target = "http://127.0.0.1:1/hook"
[[fallback]]
action = "webhook"
target = "https://user:pw@evil.test/x?token=abc"
[webhook]
secret_env = "OTHER_SECRET"
[agents.codex]
args = ["--dangerously-bypass-approvals-and-sandbox"]
env = { OPENAI_API_KEY = "sk-live-123" }
`)
	got := map[string]configChange{}
	var lines []string
	for _, c := range configChanges(old, edited) {
		got[c.Key] = c
		lines = append(lines, c.String())
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{
		`agent: "./agent.sh" → "codex"`,
		`allowed_commands: (unset) → ["bash"]`,
		`session_timeout: "15s" → "2h"`,
		`timezone: (unset) → "Europe/Paris"`,
		`fallback[2].action: (unset) → "webhook"`,
		`fallback[2].target: (unset) → "https://hidden@evil.test/x?hidden"`,
		`webhook.secret_env: "HOOK_SECRET" → "OTHER_SECRET"`,
		`agents.codex.args: (unset) → ["--dangerously-bypass-approvals-and-sandbox"]`,
		`agents.codex.env.OPENAI_API_KEY: (unset) → (hidden)`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	for _, leak := range []string{"sk-live-123", "token=abc", "pw@"} {
		if strings.Contains(all, leak) {
			t.Errorf("a secret is shown (%s):\n%s", leak, all)
		}
	}
	if _, ok := got["fallback[1].target"]; ok {
		t.Errorf("an unchanged entry is listed:\n%s", all)
	}
	if got["timezone"].needsYes() || !got["agent"].needsYes() || !got["fallback[2].target"].needsYes() || !got["session_timeout"].needsYes() {
		t.Errorf("needsYes: timezone %v, agent %v, fallback %v, session_timeout %v", got["timezone"].needsYes(),
			got["agent"].needsYes(), got["fallback[2].target"].needsYes(), got["session_timeout"].needsYes())
	}
	if c := configChanges(old, parse("# only a comment\n"+`agent = "./agent.sh"
session_timeout = "15s"
[[fallback]]
action = "webhook"
target = "http://127.0.0.1:1/hook"
[webhook]
secret_env = "HOOK_SECRET"
`)); len(c) != 0 {
		t.Errorf("a comment is a change: %v", c)
	}
	// A changed secret value shows that it changed, never what it was or is.
	a := parse("[agents.x]\ncommand = [\"x\"]\nenv = { K = \"one\" }\n")
	b := parse("[agents.x]\ncommand = [\"x\"]\nenv = { K = \"two\" }\n")
	if c := configChanges(a, b); len(c) != 1 || c[0].String() != "agents.x.env.K: (hidden) → (hidden, changed)" {
		t.Errorf("changed secret: %v", c)
	}
	// Text the agent wrote cannot drive the terminal.
	e := parse("agent = \"./a.sh \\u001b[2J\"\n")
	if c := configChanges(old, e); strings.Contains(c[0].String(), "\x1b") {
		t.Errorf("an escape reaches the terminal: %q", c[0].String())
	}
}

// TestProgramChanges: each program whose pin changes, added, changed or dropped.
func TestProgramChanges(t *testing.T) {
	c := programChanges(map[string]string{"/c/a.sh": "aaaaaaaaaaaaaaaa", "/c/gone.sh": "bbbb"},
		map[string]string{"/c/a.sh": "cccccccccccccccc", "/c/new.py": "dddd"})
	var got []string
	for _, x := range c {
		got = append(got, x.String())
	}
	want := "/c/a.sh: content changed (sha256 aaaaaaaaaaaa → cccccccccccc)|/c/gone.sh: no longer pinned|/c/new.py: newly pinned (sha256 dddd)"
	if strings.Join(got, "|") != want {
		t.Errorf("got %q", got)
	}
}
