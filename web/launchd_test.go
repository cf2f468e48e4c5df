package web_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	e2efixture "github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/launchctltest"
	"github.com/cryochamber/cryochamber/web"
)

// TestDashboardLaunchd: through the launchd backend (launchctl is the stand-in that answers as
// macOS does; there is no Mac here), the dashboard answers what the CLI prints. The backend
// reads its timers back with its own Read (calendars, the periodic dead-man check), which the
// dashboard's shared connection must pass through, and pausing from the page arms the pause's
// end at the minute launchd can fire (its FireAt).
func TestDashboardLaunchd(t *testing.T) {
	fake := launchctltest.New(t)
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "mac-plan")
	e2efixture.WriteFiles(t, dir, e2efixture.Files{
		"plan.md":   "x\n",
		"cryo.toml": "agent = \"./agent.sh\"\nbackend = \"launchd\"\n",
		"agent.sh":  "#!/bin/sh\necho '[CRYO:EXIT 0] ok'\necho '[CRYO:WAKE +2h]'\n",
	})
	env := []string{"HOME=" + home, "TZ=UTC", "LANG=C.UTF-8", "USER=tester"}
	for _, kv := range fake.Env() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + v + ":" + e2efixture.BinDir() + ":" + os.Getenv("PATH")
		}
		env = append(env, kv)
	}
	cryo := func(args ...string) string {
		t.Helper()
		r := e2efixture.Cmd{Env: env, Dir: home}.Run(t, args...)
		if r.Code != 0 {
			t.Fatalf("cryochamber %v: exit %d\n%s", args, r.Code, r.Output)
		}
		return r.Stdout
	}
	cryo("start", filepath.Join(dir, "plan.md"))

	stateDir := filepath.Join(home, ".local", "state", "cryochamber")
	cenv := &chamber.Env{
		Registry: filepath.Join(stateDir, "registry"), StateDir: stateDir, Now: time.Now, Local: time.UTC,
		Binary: e2efixture.Binary(), Environ: env, PID: os.Getpid(), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
		OpenBackend: func(ctx context.Context, name string) (timer.Backend, error) {
			// As the binary opens it (env.go).
			return timer.NewLaunchd(ctx, timer.LaunchdOptions{AgentsDir: filepath.Join(home, "Library", "LaunchAgents"),
				UID: os.Getuid(), Localtime: "/etc/localtime", Env: env, Now: time.Now})
		},
	}
	tok, err := web.LoadToken(filepath.Join(t.TempDir(), "token"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Options{Source: web.NewSource(cenv), Token: tok, Now: time.Now, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	get := func(path string) string {
		t.Helper()
		r, _ := http.NewRequest("GET", ts.URL+path, nil)
		r.Header.Set(web.TokenHeader, tok)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
		return body
	}
	id := timer.ID(dir)
	compare := func(what, path string, args ...string) {
		t.Helper()
		var got, want any
		mustJSON(t, get(path), &got)
		mustJSON(t, cryo(args...), &want)
		if m, ok := got.(map[string]any); ok {
			delete(m, "next_wake_relative")
			delete(want.(map[string]any), "next_wake_relative")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n%v\nthe CLI:\n%v", what, got, want)
		}
	}
	compare("status", "/api/chambers/"+id+"/status", "status", "--json", "--dir", dir)
	compare("ps", "/api/ps", "ps", "--json", "--backend", "launchd")
	var gv, wv map[string]any
	mustJSON(t, get("/api/chambers/"+id+"/validate"), &gv)
	mustJSON(t, cryo("validate", "--json", "--dir", dir), &wv)
	if checkVerdicts(gv) != checkVerdicts(wv) {
		t.Errorf("validate: %s\nthe CLI: %s", checkVerdicts(gv), checkVerdicts(wv))
	}

	// Pausing from the page arms the pause's end through the backend as the CLI does. (A time
	// on a whole minute: `pause --until +3h` itself leaves launchd's timer at the next minute and
	// the state at the second, which status reports, from the CLI as from here.)
	until := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Minute).Format("2006-01-02T15:04Z")
	r, _ := http.NewRequest("POST", ts.URL+"/api/chambers/"+id+"/pause", strings.NewReader(`{"until": "`+until+`"}`))
	r.Header.Set(web.TokenHeader, tok)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	compare("status after pause", "/api/chambers/"+id+"/status", "status", "--json", "--dir", dir)
	var st chamber.StatusInfo
	mustJSON(t, cryo("status", "--json", "--dir", dir), &st)
	if st.State != "paused" || len(st.Warnings) > 0 {
		t.Fatalf("after a pause from the dashboard: %s, warnings %q", st.State, st.Warnings)
	}
	for _, ti := range st.Timers {
		if !ti.Agree {
			t.Errorf("the %s timer disagrees after the pause: %+v", ti.Kind, ti)
		}
	}
}
