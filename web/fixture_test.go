package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
	"github.com/cryochamber/cryochamber/web"
)

// The handler tests run the dashboard in process against real chambers: started by the real
// cryochamber binary, armed in a private systemd user manager (timer/systemdtest), read back
// through the chamber package as the server does.

var binPath string // the cryochamber binary, built once

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cryo-web-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "cryochamber")
	if out, err := exec.Command("go", "build", "-o", binPath, "github.com/cryochamber/cryochamber").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cryochamber: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// replyAgent answers every message: it finds "ping-<word>" in its prompt and replies
// "pong for ping-<word>".
const replyAgent = `#!/bin/sh
for last; do :; done
msg=$(printf '%s' "$last" | grep -o 'ping-[a-z0-9]*' | head -n 1)
echo "working on session $CRYO_SESSION"
echo "a line on stderr" >&2
if [ -n "$msg" ]; then echo "[CRYO:REPLY \"pong for $msg\"]"; fi
echo "[CRYO:PLAN remember session $CRYO_SESSION]"
echo "[CRYO:EXIT 0] session $CRYO_SESSION done"
echo "[CRYO:WAKE +1h]"
`

// hostileAgent prints markup and script where the dashboard shows agent text: its output, its
// EXIT summary, its PLAN notes and its REPLY.
const hostileAgent = `#!/bin/sh
echo "<script>window.__pwned=1</script>"
echo "<img src=x onerror='window.__pwned=2'>"
echo "[click me](javascript:window.__pwned=3) javascript:window.__pwned=4"
echo "</pre></div><a href='javascript:window.__pwned=5'>five</a>"
echo "[CRYO:PLAN <script>window.__pwned=6</script>]"
printf '[CRYO:PLAN invoice \342\200\256fdp.exe]\n'
printf 'bidi \342\200\256txt.exe and zero\342\200\213width\n'
echo "[CRYO:REPLY \"<img src=x onerror='window.__pwned=7'>\"]"
echo "[CRYO:EXIT 0] <script>window.__pwned=8</script><b>bold</b>"
echo "[CRYO:WAKE +2h]"
`

type fixture struct {
	t      testing.TB
	mgr    *systemdtest.Manager
	env    []string // for the binary
	cenv   *chamber.Env
	src    *web.Source
	token  string
	srv    *web.Server
	ts     *httptest.Server
	dirs   map[string]string // name → chamber directory
	client *http.Client
}

// newFixture starts a user manager and a chamber per agent (name → script), each started by
// the binary (after prepare, if given, has seen its directory), and a dashboard on an
// httptest server.
func newFixture(t testing.TB, agents map[string]string, prepare ...func(name, dir string)) *fixture {
	t.Helper()
	mgr := systemdtest.Start(t)
	f := &fixture{t: t, mgr: mgr, dirs: map[string]string{}}
	f.env = []string{"TZ=UTC", "LANG=C.UTF-8", "USER=tester", "PATH=" + filepath.Dir(binPath) + ":" + os.Getenv("PATH")}
	for _, kv := range mgr.Env() {
		if !strings.HasPrefix(kv, "PATH=") {
			f.env = append(f.env, kv)
		}
	}
	root := t.TempDir()
	for name, script := range agents {
		dir := filepath.Join(root, name)
		writeFile(t, filepath.Join(dir, "plan.md"), "Answer the messages.\n", 0o644)
		writeFile(t, filepath.Join(dir, "cryo.toml"), "agent = \"./agent.sh\"\nwatch_inbox = false\n", 0o644)
		writeFile(t, filepath.Join(dir, "agent.sh"), script, 0o755)
		f.dirs[name] = dir
		for _, p := range prepare {
			p(name, dir)
		}
	}
	// Started four at a time: the benchmark starts a hundred.
	names := make(chan string)
	errs := make(chan error, len(agents))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				if out, err := f.run("start", filepath.Join(f.dirs[name], "plan.md")); err != nil {
					errs <- fmt.Errorf("start %s: %v\n%s", name, err, out)
				}
			}
		}()
	}
	for name := range agents {
		names <- name
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v\nmanager:\n%s", err, mgr.Journal(t))
	}
	stateDir := filepath.Join(mgr.Home, ".local", "state", "cryochamber")
	f.cenv = &chamber.Env{
		Registry: filepath.Join(stateDir, "registry"),
		StateDir: stateDir,
		Now:      time.Now,
		Local:    time.UTC,
		Binary:   binPath,
		Environ:  f.env,
		PID:      os.Getpid(),
		Stdout:   &bytes.Buffer{},
		Stderr:   &bytes.Buffer{},
		OpenBackend: func(ctx context.Context, name string) (timer.Backend, error) {
			// As the binary opens it (cli.go), lingering check included.
			o := mgr.Options()
			if u, err := user.Current(); err == nil {
				o.LingerFile = filepath.Join("/var/lib/systemd/linger", u.Username)
			}
			return timer.NewSystemd(ctx, o)
		},
	}
	f.src = web.NewSource(f.cenv)
	tok, err := web.LoadToken(filepath.Join(t.TempDir(), "web", "token"))
	if err != nil {
		t.Fatal(err)
	}
	f.token = tok
	f.srv, err = web.New(web.Options{Source: f.src, Token: tok, Now: time.Now, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.ts.Close)
	f.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 60 * time.Second}
	return f
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func writeFile(t testing.TB, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// run runs the binary as the user would, bounded in time; safe from any goroutine.
func (f *fixture) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env, cmd.Dir = f.env, f.mgr.Home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// cryo runs the binary and checks its exit status; it returns what it printed on stdout.
func (f *fixture) cryo(want int, args ...string) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env, cmd.Dir = f.env, f.mgr.Home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("cryochamber %v: %v", args, err)
	}
	if code != want {
		f.t.Fatalf("cryochamber %v exited %d, want %d\n[stdout]\n%s[stderr]\n%s\nmanager:\n%s", args, code, want, out.String(), errb.String(), f.mgr.Journal(f.t))
	}
	return out.String()
}

func (f *fixture) id(name string) string { return timer.ID(f.dirs[name]) }

// req sends a request to the dashboard; auth is "header", "url" (?token=), "cookie" (the token
// in a cookie, which the dashboard never accepts) or "" (none).
func (f *fixture) req(method, path, auth string, body any, hdr ...string) *http.Response {
	f.t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		data, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	r, err := http.NewRequest(method, f.ts.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	switch auth {
	case "header":
		r.Header.Set(web.TokenHeader, f.token)
	case "url":
		q := r.URL.Query()
		q.Set("token", f.token)
		r.URL.RawQuery = q.Encode()
	case "cookie":
		r.AddCookie(&http.Cookie{Name: "cryochamber_token", Value: f.token})
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			r.Host = hdr[i+1]
			continue
		}
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.client.Do(r)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// get fetches a path with the token and returns the status and the body.
func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	resp := f.req("GET", path, "header", nil, "Accept", "text/html")
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// statusOf is `cryochamber status --json` of a chamber, from the binary.
func (f *fixture) statusOf(name string) chamber.StatusInfo {
	f.t.Helper()
	var st chamber.StatusInfo
	if err := json.Unmarshal([]byte(f.cryo(0, "status", "--json", "--dir", f.dirs[name])), &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}
