package agent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	old := checkTimeout
	checkTimeout = 500 * time.Millisecond
	t.Cleanup(func() { checkTimeout = old })

	bin := t.TempDir()
	// Fake CLIs, one directory each so that PATH decides which one is found.
	n := 0
	fake := func(name, body string) string {
		n++
		d := filepath.Join(bin, strconv.Itoa(n))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		script(t, d, name, body)
		return d
	}
	touched := filepath.Join(bin, "custom-ran")
	dir := t.TempDir()
	script(t, dir, "agent.sh", "touch "+touched+"\nexit 1\n")
	if err := os.WriteFile(filepath.Join(dir, "noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		spec      Spec
		path      string // PATH of env; "" = testPath
		wantErr   string // in Error(); "" = success
		wantHint  string // in Hint
		wantIsErr error  // errors.Is
	}{
		{
			name: "claude answers",
			spec: Presets()["claude"],
			path: fake("claude", "echo '2.1.330 (Claude Code)'\n") + ":/usr/bin:/bin",
		},
		{
			name: "stdin is /dev/null, working directory is the chamber",
			spec: Presets()["codex"],
			path: fake("codex", `[ "$(readlink /proc/$$/fd/0)" = /dev/null ] || { echo "stdin is $(readlink /proc/$$/fd/0)"; exit 1; }
[ "$PWD" = "`+dir+`" ] || { echo "cwd is $PWD"; exit 1; }
[ "$1" = --version ] || { echo "args: $*"; exit 1; }
echo codex-cli 0.169.0
`) + ":/usr/bin:/bin",
		},
		{
			name:      "not installed",
			spec:      Presets()["claude"],
			wantErr:   `agent "claude" is not on the PATH the agent runs with (/usr/bin:/bin)`,
			wantHint:  "install Claude Code: npm install -g @anthropic-ai/claude-code",
			wantIsErr: exec.ErrNotFound,
		},
		{
			name:     "not installed: the login a service needs",
			spec:     Presets()["claude"],
			wantErr:  "is not on the PATH",
			wantHint: "claude setup-token",
		},
		{
			name:     "codex not installed",
			spec:     Presets()["codex"],
			wantErr:  `agent "codex" is not on the PATH`,
			wantHint: "npm install -g @openai/codex",
		},
		{
			name:     "opencode not installed",
			spec:     Presets()["opencode"],
			wantErr:  `agent "opencode" is not on the PATH`,
			wantHint: "npm install -g opencode-ai",
		},
		{
			name: "PATH from the agent's own env",
			spec: Spec{Name: "opencode", Command: []string{"opencode", "run"}, Stdin: true,
				Env: []string{"PATH=" + fake("opencode", "echo 1.18.33\n") + ":/usr/bin:/bin"}},
		},
		{
			name: "runs with the preset's environment, as a session does",
			spec: Presets()["opencode"],
			path: fake("opencode", `[ "$OPENCODE_PERMISSION" = '{"external_directory":"allow"}' ] || { echo "OPENCODE_PERMISSION=$OPENCODE_PERMISSION"; exit 1; }
echo 1.18.33
`) + ":/usr/bin:/bin",
		},
		{
			name:     "launcher without node",
			spec:     Presets()["codex"],
			path:     fake("codex", "echo \"/usr/bin/env: 'node': No such file or directory\" >&2\nexit 127\n") + ":/usr/bin:/bin",
			wantErr:  "failed `codex --version` (exit status 127): /usr/bin/env: 'node': No such file or directory",
			wantHint: "started by node, which is not on the PATH",
		},
		{
			name:     "fails with output",
			spec:     Presets()["opencode"],
			path:     fake("opencode", "echo line one\necho 'error: broken install' >&2\nexit 3\n") + ":/usr/bin:/bin",
			wantErr:  "failed `opencode --version` (exit status 3): line one | error: broken install",
			wantHint: "reinstall with: npm install -g opencode-ai",
		},
		{
			name:     "no version printed",
			spec:     Presets()["claude"],
			path:     fake("claude", "echo hello\n") + ":/usr/bin:/bin",
			wantErr:  "printed no version for `claude --version`: hello",
			wantHint: "is Claude Code",
		},
		{
			name:     "hangs",
			spec:     Presets()["claude"],
			path:     fake("claude", "echo starting\nsleep 30\n") + ":/usr/bin:/bin",
			wantErr:  "did not answer `claude --version` within 500ms (run headless, stdin closed): starting",
			wantHint: "first-run prompt",
		},
		{
			name: "a custom program is found, never run",
			spec: Spec{Command: []string{"./agent.sh"}},
		},
		{
			name:     "a custom program is missing",
			spec:     Spec{Command: []string{"my-agent", "--go"}},
			wantErr:  `agent "my-agent" is not on the PATH the agent runs with (/usr/bin:/bin)`,
			wantHint: "install it, or give its absolute path",
		},
		{
			name:     "a relative path that does not exist",
			spec:     Spec{Command: []string{"./missing.sh"}},
			wantErr:  `cannot run: agent program "` + filepath.Join(dir, "missing.sh") + `" does not exist`,
			wantHint: "relative paths are relative to the chamber",
		},
		{
			name:     "not executable",
			spec:     Spec{Command: []string{"./noexec"}},
			wantErr:  "it is not executable (chmod +x",
			wantHint: "fix the agent's path",
		},
		{
			name:     "no command",
			spec:     Spec{Name: "mine"},
			wantErr:  `agent "mine" has no command line`,
			wantHint: "[agents.NAME]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.path
			if p == "" {
				p = "/usr/bin:/bin"
			}
			err := Check(context.Background(), tt.spec, []string{"PATH=" + p, "HOME=" + dir}, dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v (hint: %s)", err, hintOf(err))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Check: %v, want %q", err, tt.wantErr)
			}
			if h := hintOf(err); !strings.Contains(h, tt.wantHint) {
				t.Errorf("hint %q, want %q", h, tt.wantHint)
			}
			if tt.wantIsErr != nil && !errors.Is(err, tt.wantIsErr) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIsErr)
			}
		})
	}
	if _, err := os.Stat(touched); err == nil {
		t.Error("Check ran a custom program (with --version)")
	}
}

// A CLI that hangs is killed with everything it started: nothing of the check outlives it.
func TestCheckKillsGroup(t *testing.T) {
	old := checkTimeout
	checkTimeout = 300 * time.Millisecond
	t.Cleanup(func() { checkTimeout = old })
	d := t.TempDir()
	pidFile := filepath.Join(d, "child.pid")
	script(t, d, "opencode", "sleep 30 &\necho $! > "+pidFile+"\nwait\n")
	err := Check(context.Background(), Presets()["opencode"], []string{"PATH=" + d + ":/usr/bin:/bin"}, d)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("Check: %v, want a timeout", err)
	}
	pid := readPID(t, pidFile)
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the CLI's child %d is still running after Check", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCheckCanceled(t *testing.T) {
	d := t.TempDir()
	script(t, d, "claude", "echo 1.0\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Check(ctx, Presets()["claude"], []string{"PATH=" + d}, d)
	if err == nil || !strings.Contains(err.Error(), "check interrupted") || !errors.Is(err, context.Canceled) {
		t.Errorf("Check with a canceled context: %v", err)
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"1.0\n", "1.0"},
		{"a\n\n  b  \r\n", "a | b"},
		{"\x1b[0mred\x1b[0m\xff", "[0mred[0m\uFFFD"},
		{strings.Repeat("x", 500) + "END", "..." + strings.Repeat("x", 397) + "END"},
		{strings.Repeat("é", 300), "..." + strings.Repeat("é", 200)},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	b := &tailBuffer{max: 4}
	b.Write([]byte("abc"))
	b.Write([]byte("def"))
	if b.String() != "cdef" {
		t.Errorf("tailBuffer kept %q, want %q", b.String(), "cdef")
	}
}

func hintOf(err error) string {
	var ce *CheckError
	if errors.As(err, &ce) {
		return ce.Hint
	}
	return ""
}
