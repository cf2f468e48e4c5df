package fallback

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/cryochamber/cryochamber/internal/envvars"
	"github.com/cryochamber/cryochamber/internal/program"
)

// Bounds on a password command: it is a helper such as `pass show smtp`, not a job.
const maxPasswordOutput = 4 << 10

// passwordCommandTimeout is a variable only so tests need not wait 10 s.
var passwordCommandTimeout = 10 * time.Second

// PasswordFrom resolves the SMTP password. With passwordEnv it is that variable of env (the
// chamber's captured environment, not this process's); with passwordCommand it is what the
// command prints on standard output, trailing newline removed. With neither it is "" (no
// authentication). Both at once is an error, so is a variable that is unset or empty.
//
// The command runs without a shell, with env as its environment and PATH, stdin from
// /dev/null, for at most 10 s (then its process group is killed), and may print at most
// 4 KiB on one line. Errors quote its standard error, never its standard output.
func PasswordFrom(ctx context.Context, env []string, passwordEnv string, passwordCommand []string) (string, error) {
	switch {
	case passwordEnv != "" && len(passwordCommand) > 0:
		return "", errors.New("password: set password_env or password_command, not both")
	case passwordEnv != "":
		v, ok := lookupEnv(env, passwordEnv)
		if !ok {
			return "", fmt.Errorf("password: environment variable %s (password_env) is not set; add it to agent_env so it is captured at start", passwordEnv)
		}
		if v == "" {
			return "", fmt.Errorf("password: environment variable %s (password_env) is empty", passwordEnv)
		}
		return v, nil
	case len(passwordCommand) > 0:
		return runPasswordCommand(ctx, env, passwordCommand)
	}
	return "", nil
}

// lookupEnv finds name in env; the last entry wins, as it does for os/exec (envvars).
var lookupEnv = envvars.Lookup

func runPasswordCommand(ctx context.Context, env []string, argv []string) (string, error) {
	name := argv[0]
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("password_command %q: "+format, append([]any{name}, args...)...)
	}
	if name == "" {
		return "", errors.New("password_command: empty program name")
	}
	path, err := lookPath(name, env)
	if err != nil {
		return fail("%w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, passwordCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, path, argv[1:]...)
	cmd.Args[0] = name
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would mean this process's environment
	}
	var stdout, stderr boundedBuffer
	stdout.max, stderr.max = maxPasswordOutput, maxPasswordOutput
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcessGroup(cmd)
	// A grandchild that keeps the pipes open would otherwise hold Wait forever.
	cmd.WaitDelay = time.Second

	err = cmd.Run()
	why := quoteStderr(stderr.b)
	switch {
	case ctx.Err() != nil:
		return fail("%w", ctx.Err())
	case cctx.Err() != nil:
		return fail("no answer within %v: killed%s", passwordCommandTimeout, why)
	case err != nil:
		return fail("%w%s", err, why)
	case stdout.over:
		return fail("printed more than %d bytes; print only the password", maxPasswordOutput)
	}
	pw := strings.TrimRight(string(stdout.b), "\r\n")
	switch {
	case pw == "":
		return fail("printed nothing on standard output%s", why)
	case strings.ContainsAny(pw, "\r\n"):
		return fail("printed more than one line; print only the password (e.g. `pass show NAME | head -n 1` under sh -c)")
	}
	return pw, nil
}

// lookPath resolves a program the way the chamber's environment would, not this process's
// (program.Look): a name with a slash must be absolute; a bare name is searched in env's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		return "", errors.New("a program path must be absolute")
	}
	pathList, _ := lookupEnv(env, "PATH")
	if pathList == "" && !strings.Contains(name, "/") {
		return "", errors.New("not found: PATH is not set in the chamber's environment")
	}
	return program.Look(name, "/", pathList)
}

// boundedBuffer keeps the first max bytes written and notes that there were more. It never
// fails a write: a child that gets EPIPE dies noisily, and we want its stderr.
type boundedBuffer struct {
	b    []byte
	max  int
	over bool
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	room := w.max - len(w.b)
	if len(p) > room {
		w.over = true
		w.b = append(w.b, p[:max(room, 0)]...)
		return len(p), nil
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

func quoteStderr(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if s == "" {
		return ""
	}
	if r := []rune(s); len(r) > 500 {
		s = string(r[:500]) + "..."
	}
	return "; stderr: " + s
}
