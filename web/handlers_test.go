package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
	e2efixture "github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/web"
)

// TestDashboard runs every route of the dashboard against two real chambers: the security
// rules first (nothing may change before them), then each page and API answer against what the
// CLI prints, then the changes (send, wake, cancel) and the event streams.
func TestDashboard(t *testing.T) {
	f := newFixture(t, map[string]string{"alpha": replyAgent, "hostile": hostileAgent})
	alpha, hostile := f.id("alpha"), f.id("hostile")

	// Every route, with a request that would succeed with the token.
	routes := []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/c/" + alpha},
		{"GET", "/assets/app.js"},
		{"GET", "/assets/style.css"},
		{"GET", "/api/ps"},
		{"GET", "/api/events"},
		{"GET", "/api/chambers/" + alpha + "/status"},
		{"GET", "/api/chambers/" + alpha + "/validate"},
		{"GET", "/api/chambers/" + alpha + "/messages"},
		{"GET", "/api/chambers/" + alpha + "/log"},
		{"GET", "/api/chambers/" + alpha + "/history"},
		{"GET", "/api/chambers/" + alpha + "/events"},
		{"POST", "/api/chambers/" + alpha + "/send"},
		{"POST", "/api/chambers/" + alpha + "/wake"},
		{"POST", "/api/chambers/" + alpha + "/cancel"},
		{"POST", "/api/chambers/" + alpha + "/pause"},
		{"POST", "/api/chambers/" + alpha + "/resume"},
	}
	sessionBefore := f.statusOf("alpha").Session

	t.Run("no token", func(t *testing.T) {
		for _, r := range routes {
			resp := f.req(r.method, r.path, "", map[string]any{"text": "ping-x", "wake": true})
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s without a token: %d, want 401", r.method, r.path, resp.StatusCode)
			}
			if strings.Contains(body, f.dirs["alpha"]) || strings.Contains(body, "session 1 done") {
				t.Errorf("%s %s without a token shows chamber data:\n%s", r.method, r.path, body)
			}
			checkHeaders(t, r.method+" "+r.path, resp)
		}
	})

	t.Run("wrong token", func(t *testing.T) {
		wrong := strings.Repeat("0", 64)
		for _, r := range routes {
			for _, how := range [][]string{
				{web.TokenHeader, wrong},
				{"Authorization", "Bearer " + wrong},
				{"Cookie", "cryochamber_token=" + f.token}, // the right token, but in a cookie
				{web.TokenHeader, f.token[:63]},
				{web.TokenHeader, f.token + "0"},
			} {
				resp := f.req(r.method, r.path, "", map[string]any{"text": "ping-x", "wake": true}, how...)
				readAll(t, resp)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s %s with %s %q: %d, want 401", r.method, r.path, how[0], how[1], resp.StatusCode)
				}
			}
		}
		resp := f.req("GET", "/?token="+url.QueryEscape(wrong), "", nil, "Accept", "text/html")
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" || !strings.Contains(body, "wrong token") {
			t.Errorf("login with a wrong token: %d, cookie %q\n%s", resp.StatusCode, resp.Header.Get("Set-Cookie"), body)
		}
	})

	// The token travels in the URL and the pages pass it on in their links, never in a
	// cookie: browsers send a host's cookies to every port of it, so another program listening
	// on 127.0.0.1 that the operator visits (an agent's own server) would receive it.
	t.Run("the token in the URL opens a page whose links carry it on, and sets no cookie", func(t *testing.T) {
		resp := f.req("GET", "/c/"+alpha+"?session=1", "url", nil, "Accept", "text/html")
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET with the token in the URL: %d\n%s", resp.StatusCode, body)
		}
		if c := resp.Header.Values("Set-Cookie"); len(c) != 0 {
			t.Errorf("the dashboard set a cookie: %q", c)
		}
		for _, link := range []string{
			`href="/?token=` + f.token + `"`,
			`href="/assets/style.css?token=` + f.token + `"`,
			`src="/assets/app.js?token=` + f.token + `"`,
			`<input type="hidden" name="token" value="` + f.token + `">`,
		} {
			if !strings.Contains(body, link) {
				t.Errorf("the page has no %s", link)
			}
		}
		for _, m := range regexp.MustCompile(`(?:href|src)="(/[^"]*)"`).FindAllStringSubmatch(body, -1) {
			if !strings.Contains(m[1], "token="+f.token) {
				t.Errorf("a link without the token: %s", m[1])
			}
		}
		resp = f.req("GET", "/", "cookie", nil)
		readAll(t, resp)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET with the token in a cookie: %d, want 401", resp.StatusCode)
		}
	})

	t.Run("cross-origin POST", func(t *testing.T) {
		cases := []struct {
			name string
			auth string
			body any
			hdr  []string
			want string
		}{
			{"the token in the URL alone (another site's form)", "url", map[string]any{"text": "ping-x"}, nil, "needs the token in the X-Cryo-Token header"},
			{"another origin", "header", map[string]any{"text": "ping-x"}, []string{"Origin", "http://evil.example"}, "another origin"},
			{"another port of this host", "header", map[string]any{"text": "ping-x"}, []string{"Origin", "http://127.0.0.1:1"}, "another origin"},
			{"an opaque origin", "header", map[string]any{"text": "ping-x"}, []string{"Origin", "null"}, "opaque origin"},
			{"the browser says cross-site", "header", map[string]any{"text": "ping-x"}, []string{"Sec-Fetch-Site", "cross-site"}, "another site"},
			{"a form's content type", "header", "text=ping-x", []string{"Content-Type", "application/x-www-form-urlencoded"}, "must be JSON"},
			{"text/plain (a simple request)", "header", `{"text":"ping-x"}`, []string{"Content-Type", "text/plain"}, "must be JSON"},
		}
		for _, c := range cases {
			for _, what := range []string{"send", "wake", "cancel", "pause", "resume"} {
				resp := f.req("POST", "/api/chambers/"+alpha+"/"+what, c.auth, c.body, c.hdr...)
				body := readAll(t, resp)
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, c.want) {
					t.Errorf("%s, POST %s: %d %s; want 403 saying %q", c.name, what, resp.StatusCode, body, c.want)
				}
			}
		}
		// The same origin (what the page's own script sends) is accepted: see the send tests.
		st := f.statusOf("alpha")
		if st.Session != sessionBefore || st.Inbox != 0 || st.Phase != chamber.PhaseArmed {
			t.Fatalf("a refused request changed the chamber: session %d, inbox %d, phase %s", st.Session, st.Inbox, st.Phase)
		}
	})

	t.Run("another host name", func(t *testing.T) {
		u, _ := url.Parse(f.ts.URL)
		port := u.Port()
		for host, want := range map[string]int{
			"evil.example:" + port:     http.StatusMisdirectedRequest, // DNS rebinding
			"127.0.0.1.nip.io:" + port: http.StatusMisdirectedRequest,
			"127.0.0.1:1":              http.StatusMisdirectedRequest,
			"127.0.0.1":                http.StatusMisdirectedRequest,
			"localhost:" + port:        http.StatusOK,
			"127.0.0.1:" + port:        http.StatusOK,
		} {
			resp := f.req("GET", "/api/ps", "header", nil, "Host", host)
			readAll(t, resp)
			if resp.StatusCode != want {
				t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
			}
		}
	})

	t.Run("paths outside the API", func(t *testing.T) {
		for _, p := range []string{
			"/etc/passwd", "/go.mod", "/assets/", "/assets/../go.mod", "/assets/..%2fsource.go", "/assets/%2e%2e/web.go",
			"/assets/templates/layout.html", "/assets/app.js/", "/c/", "/c/" + url.PathEscape(f.dirs["alpha"]),
			"/c/..%2f..%2fetc%2fpasswd", "/c/cryo-alpha-00000000", "/c/CRYO-" + alpha[5:], "/api/chambers/" + alpha,
			"/api/chambers/" + alpha + "/status/../../../../etc/passwd", "/api/chambers/..%2F..%2Fetc/status",
			"/api/chambers/" + url.PathEscape(f.dirs["alpha"]) + "/status", "/api/chambers/" + alpha + "/log?session=../../etc/passwd",
			"/api/nothing", "/favicon.ico", "/.git/config", "/web/source.go",
		} {
			resp := f.req("GET", p, "header", nil)
			body := readAll(t, resp)
			if resp.StatusCode == 200 || resp.StatusCode >= 500 {
				t.Errorf("GET %s: %d, want a refusal\n%s", p, resp.StatusCode, body)
			}
			for _, leak := range []string{"root:", "module github.com", "package web", "[core]", "{{define"} {
				if strings.Contains(body, leak) {
					t.Errorf("GET %s answered with a file (%q):\n%s", p, leak, body)
				}
			}
			checkHeaders(t, "GET "+p, resp)
		}
		for _, p := range []string{"/api/events", "/api/chambers/" + alpha + "/events"} {
			resp := f.req("HEAD", p, "header", nil)
			readAll(t, resp)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
				t.Errorf("HEAD %s: %d %q", p, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
		for _, m := range []string{"PUT", "DELETE", "PATCH", "OPTIONS"} {
			resp := f.req(m, "/api/chambers/"+alpha+"/cancel", "header", nil, "Content-Type", "application/json")
			readAll(t, resp)
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s: %d, want 405", m, resp.StatusCode)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s answers with CORS headers", m)
			}
		}
		if st := f.statusOf("alpha"); st.Phase != chamber.PhaseArmed {
			t.Fatalf("alpha is %s after the refused requests", st.Phase)
		}
	})

	t.Run("the JSON API answers as the CLI's --json does", func(t *testing.T) {
		var got, want []map[string]any
		getJSON(t, f, "/api/ps", &got)
		mustJSON(t, f.cryo(0, "ps", "--json"), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("/api/ps:\n%v\nps --json:\n%v", got, want)
		}
		for _, name := range []string{"alpha", "hostile"} {
			id, dir := f.id(name), f.dirs[name]
			var gs, ws map[string]any
			getJSON(t, f, "/api/chambers/"+id+"/status", &gs)
			mustJSON(t, f.cryo(0, "status", "--json", "--dir", dir), &ws)
			// The relative time is computed at the moment of each call.
			delete(gs, "next_wake_relative")
			delete(ws, "next_wake_relative")
			if !reflect.DeepEqual(gs, ws) {
				t.Errorf("%s status:\n%v\nstatus --json:\n%v", name, gs, ws)
			}
			var gv, wv map[string]any
			getJSON(t, f, "/api/chambers/"+id+"/validate", &gv)
			mustJSON(t, f.cryo(0, "validate", "--json", "--dir", dir), &wv)
			// Checks 7 and 8 measure the disk at that moment: compare their verdicts.
			if keys(gv) != keys(wv) || checkVerdicts(gv) != checkVerdicts(wv) || !reflect.DeepEqual(gv["exit"], wv["exit"]) {
				t.Errorf("%s validate:\n%v\nvalidate --json:\n%v", name, gv, wv)
			}
			var gm, wm []map[string]any
			getJSON(t, f, "/api/chambers/"+id+"/messages", &gm)
			mustJSON(t, f.cryo(0, "receive", "--all", "--json", "--dir", dir), &wm)
			if !reflect.DeepEqual(gm, wm) {
				t.Errorf("%s messages:\n%v\nreceive --all --json:\n%v", name, gm, wm)
			}
			for _, q := range []string{"", "?since=2000-01-01", "?until=2000-01-01"} {
				var gh, wh []map[string]any
				getJSON(t, f, "/api/chambers/"+id+"/history"+q, &gh)
				args := []string{"history", "--json", "--all", "--dir", dir}
				if k, v, ok := strings.Cut(strings.TrimPrefix(q, "?"), "="); ok {
					args = append(args, "--"+k, v)
				}
				mustJSON(t, f.cryo(0, args...), &wh)
				if !reflect.DeepEqual(gh, wh) || q != "?until=2000-01-01" && len(gh) != 1 || q == "?until=2000-01-01" && len(gh) != 0 {
					t.Errorf("%s history%s:\n%v\nhistory --json:\n%v", name, q, gh, wh)
				}
			}
			for _, q := range []string{"", "?session=1"} {
				resp := f.req("GET", "/api/chambers/"+id+"/log"+q, "header", nil)
				body := readAll(t, resp)
				args := []string{"log", "--dir", dir}
				if q != "" {
					args = append(args, "--session", "1")
				}
				if resp.StatusCode != 200 || body != f.cryo(0, args...) || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
					t.Errorf("%s log%s: %d %q\n%s", name, q, resp.StatusCode, resp.Header.Get("Content-Type"), body)
				}
			}
		}
		for q, want := range map[string]int{"log?session=0": 400, "log?session=x": 400, "log?session=99": 400, "history?since=soon": 400, "history?until=x": 400} {
			resp := f.req("GET", "/api/chambers/"+alpha+"/"+q, "header", nil)
			body := readAll(t, resp)
			if resp.StatusCode != want {
				t.Errorf("log%s: %d, want %d\n%s", q, resp.StatusCode, want, body)
			}
		}
	})

	t.Run("pages", func(t *testing.T) {
		code, body := f.get("/")
		if code != 200 {
			t.Fatalf("overview: %d\n%s", code, body)
		}
		for _, want := range []string{">alpha</a>", ">hostile</a>", "/c/" + alpha, "session 1 done", `class="state state-armed"`, "(in 59m", "plan)"} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q:\n%s", want, body)
			}
		}
		code, body = f.get("/c/" + alpha)
		if code != 200 {
			t.Fatalf("chamber page: %d\n%s", code, body)
		}
		for _, want := range []string{
			"working on session 1",                        // the block
			`<span class="t">a line on stderr</span>`,     // stderr, without its prefix
			"remember session 1",                          // the PLAN note
			"markers parsed",                              // the checks
			"the plan&#39;s wake",                         // upcoming
			"dead-man check",                              // the fallback timer
			`name="cryo-token" content="` + f.token + `"`, // for the script's POSTs
			`data-chamber="` + alpha + `"`,
			`<svg class="spend"`, // the spend chart (issue 25)
			"of unknown cost",    // its sessions report no usage: marked, not free
		} {
			if !strings.Contains(body, want) {
				t.Errorf("chamber page lacks %q", want)
			}
		}
		for _, p := range []string{"/c/" + alpha + "?session=1", "/c/" + hostile} {
			if code, body := f.get(p); code != 200 {
				t.Errorf("%s: %d\n%s", p, code, body)
			}
		}
		for p, want := range map[string]int{"/c/" + alpha + "?session=x": 400, "/c/" + alpha + "?session=-1": 400} {
			if code, _ := f.get(p); code != want {
				t.Errorf("%s: %d, want %d", p, code, want)
			}
		}
		code, body = f.get("/c/" + alpha + "?session=7")
		if code != 200 || !strings.Contains(body, "session 7 is not in cryo.log") {
			t.Errorf("a session that is not in the log: %d\n%s", code, body)
		}
		resp := f.req("GET", "/assets/app.js", "header", nil)
		js := readAll(t, resp)
		if resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || !strings.Contains(js, "X-Cryo-Token") {
			t.Errorf("app.js: %q", resp.Header.Get("Content-Type"))
		}
	})

	t.Run("agent text is escaped", func(t *testing.T) {
		for _, p := range []string{"/", "/c/" + hostile} {
			_, body := f.get(p)
			// The page's own markup has exactly one script element, and no event handler.
			if n := strings.Count(body, "<script"); n != 1 {
				t.Errorf("%s has %d <script elements", p, n)
			}
			for _, bad := range []string{"<img", "<b>", `href="javascript`, "href='javascript", "</pre></div><a"} {
				if strings.Contains(body, bad) {
					t.Errorf("%s holds agent markup %q", p, bad)
				}
			}
			if !strings.Contains(body, "&lt;script&gt;window.__pwned=") {
				t.Errorf("%s does not show the agent's <script> as text", p)
			}
		}
		_, body := f.get("/c/" + hostile)
		// Bidirectional and zero-width controls are shown as U+FFFD, never obeyed.
		if strings.ContainsAny(body, "\u202e\u200b") || !strings.Contains(body, "invoice \ufffdfdp.exe") || !strings.Contains(body, "bidi \ufffdtxt.exe and zero\ufffdwidth") {
			t.Error("the page passes an agent's bidirectional or zero-width controls through")
		}
		for _, want := range []string{"&lt;img src=x onerror=&#39;window.__pwned=2&#39;&gt;", "javascript:window.__pwned=4", "&lt;b&gt;bold&lt;/b&gt;"} {
			if !strings.Contains(body, want) {
				t.Errorf("the hostile page lacks %q as text", want)
			}
		}
	})

	t.Run("send without waking", func(t *testing.T) {
		var res map[string]any
		postJSON(t, f, "/api/chambers/"+alpha+"/send", map[string]any{"text": "ping-first", "from": "erin"}, 200, &res)
		if out, _ := res["output"].(string); !strings.HasPrefix(out, "sent ") || !strings.Contains(out, "it will be read at the next wake") {
			t.Errorf("send answered %v", res)
		}
		if st := f.statusOf("alpha"); st.Inbox != 1 || st.Session != sessionBefore {
			t.Fatalf("after send: inbox %d, session %d", st.Inbox, st.Session)
		}
		_, body := f.get("/c/" + alpha)
		// The plan is shown, read-only; NOTES.md too, and a NOTES.md that is a symlink to a
		// file outside is named as such, never followed.
		if !strings.Contains(body, "Answer the messages.") {
			t.Error("the page does not show plan.md")
		}
		secret := filepath.Join(t.TempDir(), "secret")
		writeFile(t, secret, "TOP SECRET\n", 0o600)
		notes := filepath.Join(f.dirs["alpha"], "NOTES.md")
		if err := os.Remove(notes); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, notes); err != nil {
			t.Fatal(err)
		}
		_, body = f.get("/c/" + alpha)
		if strings.Contains(body, "TOP SECRET") || !strings.Contains(body, "NOTES.md cannot be shown") {
			t.Error("the page followed a NOTES.md symlink, or did not say why it shows nothing")
		}
		// The conversation shows what the operator sent, waiting in the inbox.
		if !strings.Contains(body, `box-inbox`) || !strings.Contains(body, "ping-first") || !strings.Contains(body, ">waiting<") {
			t.Error("the page does not show the waiting message")
		}
		// The overview forgets the status of a chamber changed through it.
		_, body = f.get("/")
		if !strings.Contains(body, "1 message(s) waiting") {
			t.Error("the overview does not show the waiting message")
		}
		// A change made elsewhere that ps shows (a pause from the CLI) is seen at once.
		f.cryo(0, "pause", "--dir", f.dirs["alpha"])
		if _, body = f.get("/"); !strings.Contains(body, `data-id="`+alpha+`" data-state="paused"`) {
			t.Error("the overview does not show a pause made from the CLI")
		}
		f.cryo(0, "resume", "--dir", f.dirs["alpha"])
		if _, body = f.get("/"); !strings.Contains(body, `data-id="`+alpha+`" data-state="armed"`) {
			t.Error("the overview does not show a resume made from the CLI")
		}
	})

	t.Run("bad requests change nothing", func(t *testing.T) {
		for _, c := range []struct {
			body any
			code int
			want string
		}{
			{map[string]any{"text": "   "}, 400, "the message is empty"},
			{map[string]any{"text": "ping-x", "wak": true}, 400, "unknown field"},
			{`{"text": "ping-x"} {"text": "again"}`, 400, "more than one JSON value"},
			{`not json`, 400, "not the expected JSON"},
			{map[string]any{"text": "ping-x", "from": "a\nb"}, 400, "one line"},
			{map[string]any{"text": strings.Repeat("x", 8<<20)}, 400, "larger than"},
		} {
			resp := f.req("POST", "/api/chambers/"+alpha+"/send", "header", c.body)
			body := readAll(t, resp)
			if resp.StatusCode != c.code || !strings.Contains(body, c.want) {
				t.Errorf("send %.60v: %d %s; want %d with %q", c.body, resp.StatusCode, body, c.code, c.want)
			}
		}
		if st := f.statusOf("alpha"); st.Inbox != 1 {
			t.Fatalf("inbox %d after refused sends, want the 1 message sent before", st.Inbox)
		}
		resp := f.req("POST", "/api/chambers/cryo-nothing-00000000/send", "header", map[string]any{"text": "ping-x"})
		if body := readAll(t, resp); resp.StatusCode != 404 {
			t.Errorf("send to an unknown chamber: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("send and wake: the session answers, the streams see it", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		page := openEvents(ctx, t, f, "/api/chambers/"+alpha+"/events")
		all := openEvents(ctx, t, f, "/api/events")
		// Following the log prints the latest block first: a log event, but no change.
		first := page.next(t, "log")
		if !first.log.Reset || first.log.Session != sessionBefore || !slices.ContainsFunc(first.log.Lines, func(l string) bool { return strings.Contains(l, "working on session 1") }) {
			t.Fatalf("first log event: %+v", first.log)
		}
		var res map[string]any
		postJSON(t, f, "/api/chambers/"+alpha+"/send", map[string]any{"text": "ping-second", "wake": true}, 200, &res)
		if out, _ := res["output"].(string); !strings.Contains(out, "woke the chamber") {
			t.Fatalf("send --wake answered %v", res)
		}
		started := page.next(t, "changed")
		if started.change.Session != sessionBefore+1 || !started.change.Running || started.change.ID != alpha {
			t.Errorf("first change: %+v", started.change)
		}
		ended := page.next(t, "changed")
		if ended.change.Session != sessionBefore+1 || ended.change.Running {
			t.Errorf("second change: %+v", ended.change)
		}
		// By the time the end is reported, the chamber has hibernated and answered.
		st := f.statusOf("alpha")
		if st.Phase != chamber.PhaseArmed || st.Session != sessionBefore+1 || st.Inbox != 0 {
			t.Fatalf("after the change event: %s session %d inbox %d", st.Phase, st.Session, st.Inbox)
		}
		if !page.sawLine("working on session 2") {
			t.Errorf("the page stream did not carry session 2's output")
		}
		for i := 0; i < 2; i++ {
			c := all.next(t, "changed")
			if c.change.ID != alpha || c.change.Session != sessionBefore+1 {
				t.Errorf("overview change %d: %+v", i, c.change)
			}
		}
		var msgs []chamber.ReceivedMessage
		getJSON(t, f, "/api/chambers/"+alpha+"/messages", &msgs)
		var bodies []string
		for _, m := range msgs {
			bodies = append(bodies, m.Body)
		}
		if !slices.ContainsFunc(bodies, func(b string) bool { return strings.Contains(b, "pong for ping-first") }) {
			t.Errorf("no reply to the messages in %q", bodies)
		}
		_, body := f.get("/c/" + alpha)
		if !strings.Contains(body, "pong for ping-first") {
			t.Error("the page does not show the reply")
		}
	})

	t.Run("wake now runs a session", func(t *testing.T) {
		before := f.statusOf("hostile").Session
		resp := f.req("POST", "/api/chambers/"+hostile+"/wake", "header", map[string]any{})
		body := readAll(t, resp)
		if resp.StatusCode != 200 && resp.StatusCode != 202 {
			t.Fatalf("wake: %d %s", resp.StatusCode, body)
		}
		e2efixture.WaitFor(t, 60*time.Second, "the session started from the page to end", func() bool {
			st := f.statusOf("hostile")
			return st.Session == before+1 && st.Phase == chamber.PhaseArmed
		})
		st := f.statusOf("hostile")
		if st.Last == nil || st.Last.Session != before+1 || st.NextReason != "plan" {
			t.Errorf("after wake now: %+v", st.Last)
		}
	})

	t.Run("pause, move the wake, resume", func(t *testing.T) {
		var res map[string]any
		for _, c := range []struct {
			body any
			want string
		}{
			{map[string]any{"until": "whenever"}, "--until"},
			{map[string]any{"until": "2001-01-01 09:00"}, "not in the future"},
			{map[string]any{"untl": "+1d"}, "unknown field"},
		} {
			resp := f.req("POST", "/api/chambers/"+hostile+"/pause", "header", c.body)
			body := readAll(t, resp)
			if resp.StatusCode != 400 || !strings.Contains(body, c.want) {
				t.Errorf("pause %v: %d %s", c.body, resp.StatusCode, body)
			}
		}
		if st := f.statusOf("hostile"); st.State != "armed" {
			t.Fatalf("a refused pause left the chamber %s", st.State)
		}
		postJSON(t, f, "/api/chambers/"+hostile+"/pause", map[string]any{"until": "+1d"}, 200, &res)
		if out, _ := res["output"].(string); !strings.Contains(out, "paused") {
			t.Errorf("pause answered %v", res)
		}
		st := f.statusOf("hostile")
		if st.State != "paused" || st.PausedUntil == nil || time.Until(*st.PausedUntil) < 23*time.Hour {
			t.Fatalf("after pause: %s until %v", st.State, st.PausedUntil)
		}
		_, page := f.get("/c/" + hostile)
		if !strings.Contains(page, `state-paused">paused`) || !strings.Contains(page, `data-action="resume"`) || strings.Contains(page, `data-target="pause-form">Pause`) {
			t.Error("the page of a paused chamber does not show it paused with a Resume button")
		}
		_, page = f.get("/")
		if !strings.Contains(page, `state-paused">paused`) || !strings.Contains(page, "until ") {
			t.Error("the overview does not show the chamber paused until a time")
		}
		resp := f.req("POST", "/api/chambers/"+hostile+"/pause", "header", map[string]any{})
		// Pausing twice is told and done, as cancelling twice (`cryochamber pause` exits 0).
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, "already paused") {
			t.Errorf("pausing twice: %d %s", resp.StatusCode, body)
		}
		postJSON(t, f, "/api/chambers/"+hostile+"/resume", map[string]any{}, 200, &res)
		if st := f.statusOf("hostile"); st.State != "armed" || st.Paused != nil {
			t.Fatalf("after resume: %s, paused %v", st.State, st.Paused)
		}
		// Resuming twice is done, as pausing twice (`cryochamber resume` exits 0).
		resp = f.req("POST", "/api/chambers/"+hostile+"/resume", "header", map[string]any{})
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Errorf("resuming an armed chamber: %d %s", resp.StatusCode, body)
		}
		if st := f.statusOf("hostile"); st.State != "armed" {
			t.Errorf("after resuming twice: %s", st.State)
		}
		resp = f.req("POST", "/api/chambers/"+hostile+"/wake", "header", map[string]any{"at": "next tuesday"})
		if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, "--at") {
			t.Errorf("wake at a bad time: %d %s", resp.StatusCode, body)
		}
		postJSON(t, f, "/api/chambers/"+hostile+"/wake", map[string]any{"at": "+5h"}, 200, &res)
		st = f.statusOf("hostile")
		if st.NextWake == nil || time.Until(*st.NextWake) < 4*time.Hour || time.Until(*st.NextWake) > 5*time.Hour+time.Minute {
			t.Fatalf("after wake --at +5h the next wake is %v (%v)", st.NextWake, res)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		var res map[string]any
		postJSON(t, f, "/api/chambers/"+alpha+"/cancel", map[string]any{}, 200, &res)
		if out, _ := res["output"].(string); !strings.Contains(out, "removed") && !strings.Contains(out, "cancel") {
			t.Errorf("cancel answered %v", res)
		}
		if st := f.statusOf("alpha"); st.Phase != chamber.PhaseCancelled {
			t.Fatalf("after cancel: %s", st.Phase)
		}
		// A cancelled chamber cannot be woken by a message: the CLI's refusal, as a 409.
		resp := f.req("POST", "/api/chambers/"+alpha+"/send", "header", map[string]any{"text": "ping-late", "wake": true})
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "cannot wake a chamber that is cancelled") {
			t.Errorf("send --wake to a cancelled chamber: %d %s", resp.StatusCode, body)
		}
		_, page := f.get("/")
		if !strings.Contains(page, `state-cancelled">cancelled`) {
			t.Error("the overview does not show the chamber cancelled")
		}
	})
}

// checkHeaders holds every answer to the security headers, errors included.
func checkHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %s = %q, want %q", what, k, got, want)
		}
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("%s: a CORS header", what)
	}
}

func getJSON(t *testing.T, f *fixture, path string, v any) {
	t.Helper()
	resp := f.req("GET", path, "header", nil)
	body := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %d %q\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	mustJSON(t, body, v)
}

func postJSON(t *testing.T, f *fixture, path string, body any, code int, v any) {
	t.Helper()
	u, _ := url.Parse(f.ts.URL)
	// What the page's own script sends: the token header, the page's origin.
	resp := f.req("POST", path, "header", body, "Origin", "http://"+u.Host, "Sec-Fetch-Site", "same-origin")
	text := readAll(t, resp)
	if resp.StatusCode != code {
		t.Fatalf("POST %s: %d, want %d\n%s", path, resp.StatusCode, code, text)
	}
	mustJSON(t, text, v)
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
}

func checkVerdicts(rep map[string]any) string {
	var out []string
	checks, _ := rep["checks"].([]any)
	for _, c := range checks {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprint(m["step"], m["name"], m["status"]))
	}
	return strings.Join(out, "; ")
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// events reads a Server-Sent Events stream.
type events struct {
	ch    chan event
	lines []string
}

type event struct {
	name   string
	log    web.LogBatch
	change web.ChangeEvent
}

func openEvents(ctx context.Context, t *testing.T, f *fixture, path string) *events {
	t.Helper()
	r, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+path, nil)
	r.Header.Set(web.TokenHeader, f.token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("GET %s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	e := &events{ch: make(chan event, 256)}
	go func() {
		defer resp.Body.Close()
		defer close(e.ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 8<<20)
		var name string
		for sc.Scan() {
			l := sc.Text()
			switch {
			case strings.HasPrefix(l, "event: "):
				name = l[7:]
			case strings.HasPrefix(l, "data: "):
				ev := event{name: name}
				var err error
				if name == "log" {
					err = json.Unmarshal([]byte(l[6:]), &ev.log)
				} else {
					err = json.Unmarshal([]byte(l[6:]), &ev.change)
				}
				if err != nil {
					ev.name = "bad: " + err.Error()
				}
				e.ch <- ev
			}
		}
	}()
	return e
}

// next returns the next event of that name, keeping the lines of the log events on the way.
func (e *events) next(t *testing.T, name string) event {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-e.ch:
			if !ok {
				t.Fatalf("the stream ended while waiting for %q", name)
			}
			if ev.name == "log" {
				e.lines = append(e.lines, ev.log.Lines...)
			}
			if ev.name == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q event within a minute", name)
		}
	}
}

func (e *events) sawLine(sub string) bool {
	// Take what has arrived meanwhile.
	for more := true; more; {
		select {
		case ev, ok := <-e.ch:
			if !ok {
				more = false
			} else if ev.name == "log" {
				e.lines = append(e.lines, ev.log.Lines...)
			}
		default:
			more = false
		}
	}
	return slices.ContainsFunc(e.lines, func(l string) bool { return strings.Contains(l, sub) })
}
