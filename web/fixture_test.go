package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	e2efixture "github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
	"github.com/cryochamber/cryochamber/web"
)

// The handler tests run the dashboard in process against real chambers: started by the real
// cryochamber binary, armed in a private systemd user manager (timer/systemdtest), read back
// through the chamber package as the server does.

// TestMain builds the cryochamber binary once (internal/e2e/fixture).
func TestMain(m *testing.M) { e2efixture.Main(m) }

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
	f.env = e2efixture.Env(mgr, "USER=tester", "PATH="+e2efixture.BinDir()+":"+os.Getenv("PATH"))
	root := t.TempDir()
	for name, script := range agents {
		dir := filepath.Join(root, name)
		e2efixture.WriteFiles(t, dir, e2efixture.Files{
			"plan.md":   "Answer the messages.\n",
			"cryo.toml": "agent = \"./agent.sh\"\nwatch_inbox = false\n",
			"agent.sh":  script,
		})
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
				if r := f.cmd().Try("start", filepath.Join(f.dirs[name], "plan.md")); r.Code != 0 {
					errs <- fmt.Errorf("start %s: exit %d (%v)\n%s", name, r.Code, r.Err, r.Output)
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
		Binary:   e2efixture.Binary(),
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

// cmd runs the binary as the user would (from HOME), bounded in time.
func (f *fixture) cmd() e2efixture.Cmd {
	return e2efixture.Cmd{Env: f.env, Dir: f.mgr.Home, Limit: 90 * time.Second}
}

// cryo runs the binary and checks its exit status; it returns what it printed on stdout.
func (f *fixture) cryo(want int, args ...string) string {
	f.t.Helper()
	r := f.cmd().Run(f.t, args...)
	if r.Code != want {
		f.t.Fatalf("cryochamber %v exited %d, want %d\n[stdout]\n%s[stderr]\n%s\nmanager:\n%s", args, r.Code, want, r.Stdout, r.Stderr, f.mgr.Journal(f.t))
	}
	return r.Stdout
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

// statusOf is `cryochamber status --json` of a chamber, from the binary.
func (f *fixture) statusOf(name string) chamber.StatusInfo {
	f.t.Helper()
	var st chamber.StatusInfo
	if err := json.Unmarshal([]byte(f.cryo(0, "status", "--json", "--dir", f.dirs[name])), &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}
