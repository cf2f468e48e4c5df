package fallback

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPasswordFrom(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, bin, "pw-ok", `printf 'from-command\n'`)
	script(t, bin, "pw-crlf", `printf 'crlf-pw\r\n'`)
	script(t, bin, "pw-env", `printf '%s\n' "$SECRET_SOURCE"`)
	script(t, bin, "pw-args", `printf '%s+%s\n' "$1" "$2"`)
	script(t, bin, "pw-fail", "echo 'leaked-stdout-pw'\necho 'gpg: decryption failed: No secret key' >&2\nexit 2\n")
	script(t, bin, "pw-empty", "echo 'vault: not logged in' >&2\n")
	script(t, bin, "pw-lines", `printf 'line1\nline2\n'`)
	script(t, bin, "pw-big", `head -c 5000 /dev/zero | tr '\0' 'a'`)
	if err := os.WriteFile(filepath.Join(bin, "pw-noexec"), []byte("#!/bin/sh\necho x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=relative/dir:" + bin + ":/usr/bin:/bin", "SMTP_PASSWORD=first", "SMTP_PASSWORD=from-env", "EMPTY=", "SECRET_SOURCE=via-env"}

	tests := []struct {
		name    string
		env     []string
		pwEnv   string
		cmd     []string
		want    string
		wantErr string
		notIn   string // must not appear in the error
	}{
		{name: "neither", env: env, want: ""},
		{name: "env var, last one wins", env: env, pwEnv: "SMTP_PASSWORD", want: "from-env"},
		{name: "env var unset", env: env, pwEnv: "NOPE", wantErr: "NOPE (password_env) is not set"},
		{name: "env var empty", env: env, pwEnv: "EMPTY", wantErr: "EMPTY (password_env) is empty"},
		{name: "both", env: env, pwEnv: "SMTP_PASSWORD", cmd: []string{"pw-ok"}, wantErr: "not both"},
		{name: "command on env's PATH", env: env, cmd: []string{"pw-ok"}, want: "from-command"},
		{name: "command with arguments", env: env, cmd: []string{"pw-args", "a b", "c"}, want: "a b+c"},
		{name: "command sees env", env: env, cmd: []string{"pw-env"}, want: "via-env"},
		{name: "CRLF trimmed", env: env, cmd: []string{"pw-crlf"}, want: "crlf-pw"},
		{name: "absolute path", env: nil, cmd: []string{filepath.Join(bin, "pw-ok")}, want: "from-command"},
		{name: "relative path", env: env, cmd: []string{"bin/pw-ok"}, wantErr: "must be absolute"},
		{name: "not on PATH", env: env, cmd: []string{"no-such-helper"}, wantErr: `"no-such-helper" not found on the PATH the chamber runs with`},
		{name: "no PATH", env: []string{"HOME=/"}, cmd: []string{"pw-ok"}, wantErr: "PATH is not set"},
		{name: "not executable", env: nil, cmd: []string{filepath.Join(bin, "pw-noexec")}, wantErr: "it is not executable (chmod +x"},
		{name: "empty program", env: env, cmd: []string{""}, wantErr: "empty program name"},
		{name: "fails: stderr, not stdout", env: env, cmd: []string{"pw-fail"},
			wantErr: "exit status 2; stderr: gpg: decryption failed: No secret key", notIn: "leaked-stdout-pw"},
		{name: "prints nothing", env: env, cmd: []string{"pw-empty"}, wantErr: "printed nothing on standard output; stderr: vault: not logged in"},
		{name: "several lines", env: env, cmd: []string{"pw-lines"}, wantErr: "more than one line", notIn: "line1"},
		{name: "too much output", env: env, cmd: []string{"pw-big"}, wantErr: "printed more than 4096 bytes", notIn: "aaaa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PasswordFrom(context.Background(), tt.env, tt.pwEnv, tt.cmd)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PasswordFrom = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				if tt.notIn != "" && strings.Contains(err.Error(), tt.notIn) {
					t.Errorf("error %q contains %q from standard output", err, tt.notIn)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("PasswordFrom = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestPasswordCommandHangs: a helper that never answers is killed at the bound, children
// included.
func TestPasswordCommandHangs(t *testing.T) {
	old := passwordCommandTimeout
	passwordCommandTimeout = 300 * time.Millisecond
	defer func() { passwordCommandTimeout = old }()

	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The grandchild keeps stdout open, as `sh -c 'gpg ... | ...'` would.
	hang := script(t, dir, "pw-hang", "sleep 60 &\necho $! > "+pidFile+"\necho 'waiting for pinentry' >&2\nwait\n")
	_, err := PasswordFrom(context.Background(), []string{"PATH=/usr/bin:/bin"}, "", []string{hang})
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms: killed; stderr: waiting for pinentry") {
		t.Fatalf("error = %v, want the command killed at the bound", err)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatalf("the script did not record its child: %v", rerr)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if perr != nil {
		t.Fatal(perr)
	}
	// The group was sent SIGKILL; give the kernel a bounded moment to reap the orphan.
	for i := 0; ; i++ {
		if !alive(pid) {
			break
		}
		if i == 100 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the helper's child %d survived the kill", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPasswordCommandContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := PasswordFrom(ctx, []string{"PATH=/usr/bin:/bin"}, "", []string{"sleep", "60"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

// alive reports whether pid is a live process. A killed orphan stays a zombie until init
// reaps it, and some containers' init never does: a zombie counts as dead.
func alive(pid int) bool {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// pid (comm) STATE ...; comm may hold spaces, so look after the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			return b[i+2] != 'Z' && b[i+2] != 'X'
		}
	} else if _, serr := os.Stat("/proc/self/stat"); serr == nil {
		return false // /proc works and the process is gone
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
