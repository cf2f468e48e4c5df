package binary

// End-to-end tests of `cryochamber web`: the installed, socket-activated dashboard against a
// private systemd user manager (the manager listens, starts the server at the first request,
// and the server exits when idle), and the foreground server.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
	"github.com/cryochamber/cryochamber/web"
)

var urlLine = regexp.MustCompile(`(?m)^open: (http://\S+/\?token=([0-9a-f]{64}))$`)

// webChamber makes and starts a chamber whose agent runs script.
func webChamber(t *testing.T, env []string, dir, script string, toml string) {
	t.Helper()
	fixture.WriteFiles(t, dir, fixture.Files{
		"plan.md":   "Answer the messages.\n",
		"cryo.toml": "agent = \"./agent.sh\"\nwatch_inbox = false\n" + toml,
		"agent.sh":  script,
	})
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
}

// get asks the dashboard for path with the token in the header, over client.
func dashGet(t *testing.T, client *http.Client, base, token, path string) (int, string) {
	t.Helper()
	r, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		r.Header.Set(web.TokenHeader, token)
	}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
}

// TestWebInstall installs the on-demand dashboard in a real user manager: the manager listens
// on the port and the Unix socket (a path with a space, a % and a non-ASCII letter), starts the
// server at the first request, the server exits after --idle, and the next request starts it
// again; ps never takes its units for a chamber's; --uninstall removes everything.
func TestWebInstall(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	env := fixture.Env(m)
	dir := filepath.Join(t.TempDir(), "garden")
	webChamber(t, env, dir, "#!/bin/sh\necho '[CRYO:EXIT 0] tended'\necho '[CRYO:WAKE +1h]'\n", "")
	port := mailtest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	sock := filepath.Join(m.RuntimeDir, "cryo web 100% é", "web.sock")
	active := func(unit string) string {
		return strings.TrimSpace(m.Systemctl(t, "is-active", unit))
	}

	// Refused before anything is written.
	if code, out := bin(t, env, m.Home, "web", "--install", "--listen", "0.0.0.0:80"); code != 2 || !strings.Contains(out, "is not a loopback address") {
		t.Fatalf("install on 0.0.0.0: exit %d\n%s", code, out)
	}
	// A port another program holds: the socket unit cannot listen; nothing is left installed.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	code, out := bin(t, env, m.Home, "web", "--install", "--listen", busy.Addr().String(), "--socket", "off")
	busy.Close()
	if code != 1 || !strings.Contains(out, "cannot install the dashboard") || !strings.Contains(out, "hint: is another program listening") {
		t.Fatalf("install on a busy port: exit %d\n%s", code, out)
	}
	for _, u := range []string{timer.WebSocketUnit, timer.WebServiceUnit} {
		if _, err := os.Stat(filepath.Join(m.UnitDir, u)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after a failed install: %v", u, err)
		}
	}

	code, out = bin(t, env, m.Home, "web", "--install", "--listen", addr, "--socket", sock, "--idle", "2s")
	if code != 0 {
		t.Fatalf("web --install: exit %d\n%s\n%s", code, out, m.Journal(t))
	}
	mu := urlLine.FindStringSubmatch(out)
	if mu == nil || !strings.HasPrefix(mu[1], "http://"+addr+"/") {
		t.Fatalf("web --install printed no URL for %s:\n%s", addr, out)
	}
	token := mu[2]
	// --url prints the installed dashboard's address, not the default one.
	if code, again := bin(t, env, m.Home, "web", "--url"); code != 0 || strings.TrimSpace(again) != mu[1] {
		t.Errorf("web --url: %q, want %q", again, mu[1])
	}
	if fi, err := os.Stat(filepath.Join(m.Home, ".local", "state", "cryochamber", "web", "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v", fi, err)
	}
	if got := active(timer.WebSocketUnit); got != "active" {
		t.Fatalf("%s is %s after install\n%s", timer.WebSocketUnit, got, m.Journal(t))
	}
	if got := active(timer.WebServiceUnit); got != "inactive" {
		t.Fatalf("%s is %s before any request: nothing should run", timer.WebServiceUnit, got)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("Unix socket %s: %v %v", sock, fi, err)
	}
	// ps lists the chamber and nothing of the dashboard.
	_, psOut := bin(t, env, m.Home, "ps", "--json")
	var rows []chamber.PsRow
	if err := json.Unmarshal([]byte(psOut), &rows); err != nil || len(rows) != 1 || rows[0].Dir != dir || rows[0].State != "armed" {
		t.Fatalf("ps --json with the dashboard installed: %v\n%s", err, psOut)
	}

	tcp := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	base := "http://" + addr
	for round := 1; round <= 2; round++ {
		if code, _ := dashGet(t, tcp, base, "", "/api/ps"); code != http.StatusUnauthorized {
			t.Errorf("round %d: /api/ps without the token: %d", round, code)
		}
		code, body := dashGet(t, tcp, base, token, "/api/ps")
		var got []chamber.PsRow
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got) != 1 || got[0].Dir != dir {
			t.Fatalf("round %d: /api/ps: %d\n%s\n%s", round, code, body, m.Journal(t))
		}
		if code, body := dashGet(t, unixClient(sock), "http://dashboard", token, "/api/chambers/"+timer.ID(dir)+"/status"); code != 200 || !strings.Contains(body, `"phase": "armed"`) {
			t.Fatalf("round %d: status over the Unix socket: %d\n%s", round, code, body)
		}
		if got := active(timer.WebServiceUnit); got != "active" {
			t.Fatalf("round %d: the server is %s while it answers", round, got)
		}
		// Idle for --idle: the server exits by itself, cleanly; the manager goes on listening.
		m.WaitFor(t, 60*time.Second, "the dashboard to exit when idle", func() bool { return active(timer.WebServiceUnit) == "inactive" })
		if res := strings.TrimSpace(m.Systemctl(t, "show", "-p", "Result", "--value", timer.WebServiceUnit)); res != "success" {
			t.Errorf("round %d: the idle exit ended with %s", round, res)
		}
		if got := active(timer.WebSocketUnit); got != "active" {
			t.Fatalf("round %d: %s is %s after the idle exit", round, timer.WebSocketUnit, got)
		}
	}
	if !strings.Contains(m.Journal(t), "cryochamber web: no request for 2s: exiting") {
		t.Errorf("the server did not say why it exited:\n%s", m.Journal(t))
	}

	// Installing again replaces it in place.
	if code, out := bin(t, env, m.Home, "web", "--install", "--listen", addr, "--socket", sock, "--idle", "2s"); code != 0 {
		t.Fatalf("second install: exit %d\n%s", code, out)
	}
	if code, _ := dashGet(t, tcp, base, token, "/api/ps"); code != 200 {
		t.Fatalf("after the second install: %d", code)
	}
	if code, out := bin(t, env, m.Home, "web", "--uninstall"); code != 0 || !strings.Contains(out, "removed the on-demand dashboard") {
		t.Fatalf("web --uninstall: exit %d\n%s", code, out)
	}
	for _, u := range []string{timer.WebSocketUnit, timer.WebServiceUnit} {
		if _, err := os.Stat(filepath.Join(m.UnitDir, u)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after uninstall: %v", u, err)
		}
		if got := active(u); got == "active" {
			t.Errorf("%s still active after uninstall", u)
		}
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("something still listens on the dashboard's port after uninstall")
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the Unix socket is left after uninstall: %v", err)
	}
	if code, out := bin(t, env, m.Home, "web", "--uninstall"); code != 0 {
		t.Errorf("a second uninstall: exit %d\n%s", code, out)
	}
}

// webProcess is `cryochamber web` running in the foreground.
type webProcess struct {
	*fixture.Process
	url string
}

// startWeb runs `cryochamber web ARGS` and waits for the URL it prints. The test ends it.
func startWeb(t *testing.T, env []string, args ...string) *webProcess {
	t.Helper()
	p := &webProcess{Process: fixture.Cmd{Env: env}.Start(t, append([]string{"web"}, args...)...)}
	fixture.WaitFor(t, 30*time.Second, "cryochamber web to print its URL", func() bool {
		if m := urlLine.FindStringSubmatch(p.Output()); m != nil {
			p.url = m[1]
			return true
		}
		select {
		case <-p.Done():
			t.Fatalf("cryochamber web exited before printing its URL:\n%s", p.Output())
		default:
		}
		return false
	})
	return p
}

// interrupt sends Ctrl-C and waits for the exit every command makes when interrupted (130).
func (p *webProcess) interrupt(t *testing.T) {
	t.Helper()
	_ = p.Signal(os.Interrupt)
	if r := p.Wait(t, 30*time.Second); r.Code != fixture.ExitInterrupted || !strings.HasSuffix(r.Output, "cryochamber: interrupted\n") {
		t.Errorf("cryochamber web after Ctrl-C: exit %d\n%s", r.Code, r.Output)
	}
}

// TestWebForeground: the foreground server prints a URL whose token opens the pages, keeps
// its token across runs, refuses a port that is taken, and ends cleanly with Ctrl-C.
func TestWebForeground(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	env := fixture.Env(m)
	addr := fmt.Sprintf("127.0.0.1:%d", mailtest.FreePort(t))
	p := startWeb(t, env, "--listen", addr)
	sock := filepath.Join(m.RuntimeDir, "cryochamber", "web.sock")
	if !strings.Contains(p.Output(), "unix "+sock) {
		t.Errorf("no Unix socket at %s:\n%s", sock, p.Output())
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := client.Get(p.url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "No chambers yet") {
		t.Fatalf("opening the printed URL: %d at %s\n%s", resp.StatusCode, resp.Request.URL, body)
	}
	if c := resp.Header.Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("the dashboard set a cookie (every port of 127.0.0.1 would receive it): %q", c)
	}

	// A second server on the same port and socket is refused with a hint.
	code, out := bin(t, env, m.Home, "web", "--listen", addr)
	if code != 1 || !strings.Contains(out, "cannot listen on "+addr) || !strings.Contains(out, "hint: is the dashboard running already") {
		t.Errorf("a second server on the port: exit %d\n%s", code, out)
	}
	other := fmt.Sprintf("127.0.0.1:%d", mailtest.FreePort(t))
	code, out = bin(t, env, m.Home, "web", "--listen", other)
	if code != 1 || !strings.Contains(out, "another dashboard answers on "+sock) {
		t.Errorf("a second server on the socket: exit %d\n%s", code, out)
	}
	p.interrupt(t)
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("the port still answers after Ctrl-C")
	}

	// The same token next time (a bookmarked URL still works); a stale socket file is replaced.
	p2 := startWeb(t, env, "--listen", addr)
	if p2.url != p.url {
		t.Errorf("the token changed between runs: %s then %s", p.url, p2.url)
	}
	resp, err = client.Get(p.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the URL of the first run: %d", resp.StatusCode)
	}
	p2.interrupt(t)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--listen", "localhost:7707"}, 2, "is not an IP address"},
		{[]string{"--listen", "10.0.0.1:7707"}, 2, "is not a loopback address"},
		{[]string{"--socket", "relative.sock"}, 2, "--socket must be an absolute path"},
		{[]string{"--idle", "-1s"}, 2, "--idle must be a positive duration"},
		{[]string{"--install", "--url"}, 2, "one at a time"},
		{[]string{"extra"}, 2, "web takes no arguments"},
	} {
		code, out := bin(t, env, m.Home, append([]string{"web"}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.want) || !strings.HasPrefix(out, "cryochamber: ") {
			t.Errorf("web %v: exit %d\n%s", c.args, code, out)
		}
	}
}
