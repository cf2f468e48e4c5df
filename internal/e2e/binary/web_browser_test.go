package binary

// The dashboard in a real browser: headless Chromium (Debian's chromium package; .ci/run
// installs it) driven with chromedp, against `cryochamber web` and two chambers armed in a
// private systemd user manager.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

var screenshots = flag.Bool("screenshots", false, "TestWebBrowser also writes its screenshots to docs/dashboard-*.png")

// chromiumPath is Debian's chromium.
const chromiumPath = "/usr/bin/chromium"

// newsAgent answers messages: it finds "ping-<word>" in its prompt and replies
// "pong for ping-<word>".
const newsAgent = `#!/bin/sh
for last; do :; done
msg=$(printf '%s' "$last" | grep -o 'ping-[a-z0-9]*' | head -n 1)
echo "checked the release feed for session $CRYO_SESSION"
echo "no new release of the library yet" >&2
if [ -n "$msg" ]; then echo "[CRYO:REPLY \"pong for $msg: nothing new upstream, next check tomorrow\"]"; fi
echo "[CRYO:PLAN look again tomorrow morning]"
echo "[CRYO:EXIT 0] no new release; checked the feed"
echo "[CRYO:WAKE +1d]"
`

// untrustedAgent prints, in its first session, markup and script wherever the dashboard shows
// agent text (output, EXIT summary, PLAN, REPLY); its later sessions print one line, wait for
// the test to create $CRYO_DIR/release, and print another, so the test sees output stream in
// while the session runs.
const untrustedAgent = `#!/bin/sh
if [ "$CRYO_SESSION" = 1 ]; then
  echo "<script>window.__pwned=1</script>"
  echo "<img src=x onerror='window.__pwned=2'>"
  echo "[click me](javascript:window.__pwned=3) javascript:window.__pwned=4"
  echo "</span></div><a href='javascript:window.__pwned=5'>five</a><style>body{display:none}</style>"
  echo "[CRYO:PLAN <script>window.__pwned=6</script>]"
  printf 'bidi \342\200\256txt.exe\n'
  echo "[CRYO:REPLY \"<img src=x onerror='window.__pwned=7'>\"]"
  echo "[CRYO:EXIT 0] <script>window.__pwned=8</script><b>bold</b>"
  echo "[CRYO:WAKE +2h]"
  exit 0
fi
echo "stream-line-1 <script>window.__pwned=9</script>"
i=0
while [ ! -e "$CRYO_DIR/release" ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
echo "stream-line-2"
echo "[CRYO:EXIT 0] streamed two lines"
echo "[CRYO:WAKE +2h]"
`

// TestWebBrowser: the overview shows both chambers; a message sent from a chamber's page wakes
// it and the reply appears without a reload, with the session in the timeline; pause, resume
// and cancel work from the page, each after its confirmation; a running session's output
// streams into the page, which follows the session's start and end by itself (the overview
// too); agent output holding <script>, <img onerror> and javascript: links is shown as text and
// runs nothing. It saves a screenshot of the overview and of a chamber page (-screenshots: into
// docs/).
func TestWebBrowser(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("%s is missing (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	m := systemdtest.Start(t)
	env := fixture.Env(m)
	root := t.TempDir()
	news, untrusted := filepath.Join(root, "release-watch"), filepath.Join(root, "untrusted-input")
	webChamber(t, env, news, newsAgent, "")
	webChamber(t, env, untrusted, untrustedAgent, "")
	addr := fmt.Sprintf("127.0.0.1:%d", mailtest.FreePort(t))
	srv := startWeb(t, env, "--listen", addr, "--socket", "off")
	base := "http://" + addr

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	// Before any page's script: record every Content-Security-Policy violation, so that the
	// test sees whether agent text even tried to run (escaping), not only that it was stopped.
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sample));`,
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var consoleMu sync.Mutex
	var exceptions []string
	go func() {
		for msg, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if msg.IsException() || msg.Type == chromedp.ConsoleError {
				consoleMu.Lock()
				exceptions = append(exceptions, msg.String())
				consoleMu.Unlock()
			}
		}
	}()
	defer func() {
		if t.Failed() {
			t.Logf("cryochamber web output:\n%s", srv.Output())
			t.Logf("manager journal (tail):\n%s", fixture.Tail(m.Journal(t), 6000))
		}
	}()

	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
		defer scancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) any {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		v, err := chromedp.Run(sctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	// until waits for a JavaScript condition to hold (through a navigation: an evaluation
	// that meets a page being replaced is tried again).
	until := func(what, expr string, timeout time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		var last error
		for time.Now().Before(deadline) {
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			v, err := chromedp.Run(sctx, chromedp.Evaluate[any](expr))
			scancel()
			if err == nil && v == true {
				return
			}
			last = err
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s (%s): not within %s (last error: %v)\npage text:\n%v", what, expr, timeout, last, eval(`document.body.innerText`))
	}
	shot := func(name string) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
		defer scancel()
		buf, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		img, err := png.Decode(bytes.NewReader(buf))
		if err != nil || img.Bounds().Dx() < 1000 || img.Bounds().Dy() < 400 {
			t.Fatalf("screenshot %s is not a page-sized PNG: %v %v", name, err, img)
		}
		dir := t.TempDir()
		if *screenshots {
			dir = filepath.Join(fixture.Repo(t), "docs")
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	noScriptRan := func(where string) {
		t.Helper()
		checks := map[string]string{
			"no agent script ran":                   `window.__pwned === undefined`,
			"the page's one script is its own":      `document.scripts.length === 1 && document.scripts[0].src === location.origin + '/assets/app.js?token=' + document.querySelector('meta[name=cryo-token]').content`,
			"no image element":                      `document.images.length === 0`,
			"no javascript: link":                   `document.querySelectorAll('[href^="javascript:" i], [src^="javascript:" i]').length === 0`,
			"no event handler attribute":            `![...document.querySelectorAll('*')].some(el => [...el.attributes].some(a => a.name.startsWith('on')))`,
			"no style element":                      `document.querySelectorAll('style').length === 0`,
			"the only links are the dashboard's":    `[...document.links].every(a => a.origin === location.origin && (a.pathname === '/' || a.pathname.startsWith('/c/cryo-')))`,
			"nothing tried to run (no CSP report)":  `window.__csp.length === 0`,
			"the page is visible (no injected CSS)": `getComputedStyle(document.body).display !== 'none'`,
		}
		for what, expr := range checks {
			if v := eval(expr); v != true {
				t.Errorf("%s: %s: %s is %v (CSP reports: %v)", where, what, expr, v, eval(`JSON.stringify(window.__csp)`))
			}
		}
	}

	// The overview: the printed URL opens it; the token stays in the URL (never in a cookie).
	step("open the printed URL", chromedp.Navigate(srv.url))
	until("the overview lists both chambers", `document.querySelectorAll('tr.chamber').length === 2`, 30*time.Second)
	if loc := eval(`location.href`); loc != srv.url {
		t.Errorf("the overview's address is %v", loc)
	}
	if c := eval(`document.cookie`); c != "" {
		t.Errorf("the dashboard left a cookie: %v", c)
	}
	// Another program listening on 127.0.0.1 (an agent's "preview" server, another user's
	// server) is visited in the same browser. Browsers send a host's cookies to every port of it
	// (RFC 6265 §8.5), so nothing the dashboard leaves in the browser may carry the token: with
	// it, that program could send, wake and cancel every chamber.
	tok := srv.url[strings.Index(srv.url, "token=")+len("token="):]
	q := "?token=" + tok
	heard := make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/preview" {
			heard <- r.URL.String() + " " + r.Header.Get("Cookie")
		}
		fmt.Fprint(w, "<!doctype html><title>preview</title><p>a preview")
	}))
	defer other.Close() // open until the end: the browser may still ask it for an icon
	step("visit another server on 127.0.0.1", chromedp.Navigate(other.URL+"/preview"))
	if got := <-heard; strings.Contains(got, tok) {
		t.Errorf("another port of 127.0.0.1 received the dashboard's token: %q", got)
	}
	step("back to the dashboard", chromedp.Navigate(srv.url))
	until("the overview again", `document.querySelectorAll('tr.chamber').length === 2`, 30*time.Second)
	names := eval(`[...document.querySelectorAll('tr.chamber .name')].map(e => e.textContent).join(',')`)
	if names != "release-watch,untrusted-input" {
		t.Errorf("overview chambers: %v", names)
	}
	if v := eval(`document.querySelector('tr[data-id="` + timer.ID(untrusted) + `"] .summary').textContent`); v != "<script>window.__pwned=8</script><b>bold</b>" {
		t.Errorf("the summary is not shown as the agent's text: %v", v)
	}
	noScriptRan("overview")
	shot("dashboard-overview.png")

	// A message from the chamber's page wakes it; the reply appears without a reload.
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	if _, err := chromedp.Run(sctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(`a.name[href="/c/`+timer.ID(news)+q+`"]`)))); err != nil {
		t.Fatalf("open release-watch: %v", err)
	}
	scancel()
	until("the chamber page", `document.body.dataset.page === 'chamber' && document.getElementById('send-text') !== null`, 30*time.Second)
	eval(`window.__sameDocument = true`)
	// A short message box, so that the conversation scrolls (CSSOM: the CSP allows no inline style),
	// scrolled to its oldest message: after Send it must show the newest.
	eval(`document.styleSheets[0].insertRule('.conversation { max-height: 40px !important; }', 0); document.getElementById('conversation').scrollTop = 0; true`)
	step("send a message",
		chromedp.SendKeys(chromedp.ID("send-text"), "ping-browser: anything new upstream?"),
		chromedp.Click(chromedp.CSS(`#send button[type=submit]`)))
	until("the send is acknowledged", `document.getElementById('notice').textContent.includes('woke the chamber')`, 30*time.Second)
	until("the reply appears", `document.getElementById('conversation').textContent.includes('pong for ping-browser')`, 90*time.Second)
	until("the message box shows the newest message", `(c => c.scrollHeight > c.clientHeight && c.scrollTop + c.clientHeight >= c.scrollHeight - 4)(document.getElementById('conversation'))`, 10*time.Second)
	if eval(`window.__sameDocument === true && document.getElementById('send-text').value === ''`) != true {
		t.Error("the page reloaded (or kept the sent text) instead of updating in place")
	}
	until("the page shows the session that answered", `document.querySelector('#head .state').textContent === 'armed' && document.getElementById('live').textContent.includes('checked the release feed for session 2')`, 30*time.Second)
	until("the timeline lists both sessions", `document.querySelectorAll('#sessions tbody tr').length === 2 && document.querySelector('#sessions tbody tr a').textContent === '2'`, 30*time.Second)
	noScriptRan("release-watch page")
	shot("dashboard-chamber.png")

	// Pause and resume from the page, each after its confirmation.
	step("ask to pause", chromedp.Click(chromedp.CSS(`button[data-target=pause-form]`)))
	until("the pause form", `!document.getElementById('pause-form').hidden`, 10*time.Second)
	step("pause for a week", chromedp.SendKeys(chromedp.CSS(`#pause-form input[name=until]`), "+7d"), chromedp.Click(chromedp.CSS(`button[data-action=pause]`)))
	until("the page shows it paused", `document.querySelector('#head .state').textContent === 'paused' && document.querySelector('#head').textContent.includes('paused since') && document.querySelector('button[data-action=resume]') !== null`, 30*time.Second)
	code, out := bin(t, env, m.Home, "status", "--json", "--dir", news)
	var paused chamber.StatusInfo
	if code != 0 || json.Unmarshal([]byte(out), &paused) != nil || paused.State != "paused" || paused.PausedUntil == nil {
		t.Fatalf("after pausing from the page: exit %d\n%s", code, out)
	}
	step("resume", chromedp.Click(chromedp.CSS(`button[data-action=resume]`)))
	until("the page shows it armed again", `document.querySelector('#head .state').textContent === 'armed' && document.querySelector('button[data-target=pause-form]') !== null`, 30*time.Second)

	// The untrusted chamber: every piece of its text is text.
	step("open untrusted-input", chromedp.Navigate(base+"/c/"+timer.ID(untrusted)+q))
	until("its latest block streams in", `document.getElementById('live').textContent.includes('<script>window.__pwned=1</script>')`, 30*time.Second)
	for _, text := range []string{
		"<script>window.__pwned=1</script>", "<img src=x onerror='window.__pwned=2'>",
		"[click me](javascript:window.__pwned=3) javascript:window.__pwned=4",
		"<a href='javascript:window.__pwned=5'>five</a><style>body{display:none}</style>",
		"<script>window.__pwned=6</script>", "<img src=x onerror='window.__pwned=7'>", "<script>window.__pwned=8</script><b>bold</b>",
	} {
		js, _ := json.Marshal(text)
		for _, region := range []string{"block", "live", "main"} {
			if region != "main" && strings.Contains(text, "__pwned=6") || region != "main" && strings.Contains(text, "__pwned=7") {
				continue // a PLAN note and a REPLY are shown in the state and the conversation
			}
			if eval(`document.getElementById('`+region+`').textContent.includes(`+string(js)+`)`) != true {
				t.Errorf("#%s does not show %s as text", region, text)
			}
		}
	}
	// A bidirectional override is shown, not obeyed, in the page and in the live output.
	until("the override is neutralized", `['block', 'live'].every(id => { const t = document.getElementById(id).textContent; return t.includes('bidi \ufffdtxt.exe') && !t.includes('\u202e'); })`, 10*time.Second)
	// Clicking the agent's would-be links does nothing: they are text.
	eval(`[...document.querySelectorAll('#block .t, #live .t')].filter(e => e.textContent.includes('javascript:')).forEach(e => e.click())`)
	if loc := eval(`location.href`); loc != base+"/c/"+timer.ID(untrusted)+q {
		t.Errorf("clicking agent text navigated to %v", loc)
	}
	noScriptRan("untrusted-input page")

	// A running session's output streams in; the page follows its start and its end.
	step("wake it now", chromedp.Click(chromedp.CSS(`button[data-action=wake]`)))
	until("the first line of session 2 streams in", `document.getElementById('live').textContent.includes('stream-line-1')`, 60*time.Second)
	var st chamber.StatusInfo
	code, out = bin(t, env, m.Home, "status", "--json", "--dir", untrusted)
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Phase != chamber.PhaseRunning || st.Session != 2 {
		t.Fatalf("while the first line is shown, session 2 should be running: exit %d\n%s", code, out)
	}
	until("the page shows the session running", `document.querySelector('#head .state').textContent === 'running'`, 30*time.Second)
	if eval(`document.getElementById('live').textContent.includes('stream-line-2') || document.getElementById('live').textContent.includes('__pwned=1')`) != false {
		t.Error("the live panel shows lines of the old block or from the future")
	}
	if err := os.WriteFile(filepath.Join(untrusted, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	until("the second line streams in", `document.getElementById('live').textContent.includes('stream-line-2')`, 60*time.Second)
	until("the page shows the session ended", `document.querySelector('#head .state').textContent === 'armed' && document.getElementById('summary').textContent.includes('streamed two lines')`, 60*time.Second)
	noScriptRan("untrusted-input page after session 2")

	// The policy is live: a script the page did not ship is refused even when injected.
	eval(`(() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1'; document.body.appendChild(s); return true; })()`)
	until("the policy refuses an injected inline script", `window.__inline === undefined && window.__csp.some(r => r.startsWith('script-src'))`, 10*time.Second)
	// The overview follows sessions by itself too: one run from the command line shows up.
	step("back to the overview", chromedp.Navigate(base+"/"+q))
	until("the overview", `document.querySelectorAll('tr.chamber').length === 2`, 30*time.Second)
	eval(`window.__sameDocument = true`)
	row := `document.querySelector('tr[data-id="` + timer.ID(news) + `"]')`
	if code, out := bin(t, env, m.Home, "wake", "--now", "--dir", news); code != 0 {
		t.Fatalf("wake --now: exit %d\n%s", code, out)
	}
	until("the overview shows session 3 without a reload", `window.__sameDocument === true && `+row+`.querySelector('td.num').textContent.trim() === '3'`, 60*time.Second)

	// Cancel, after its confirmation.
	step("open untrusted-input again", chromedp.Navigate(base+"/c/"+timer.ID(untrusted)+q))
	step("ask to cancel", chromedp.Click(chromedp.CSS(`button[data-target=cancel-confirm]`)))
	if eval(`document.querySelector('#head .state').textContent`) != "armed" {
		t.Fatal("asking to cancel cancelled")
	}
	step("confirm", chromedp.Click(chromedp.CSS(`button[data-action=cancel]`)))
	until("the page shows it cancelled", `document.querySelector('#head .state').textContent === 'cancelled'`, 30*time.Second)

	consoleMu.Lock()
	for _, e := range exceptions {
		if !strings.Contains(e, "Content Security Policy") {
			t.Errorf("the page logged an error: %s", e)
		}
	}
	consoleMu.Unlock()

	srv.interrupt(t)
}
