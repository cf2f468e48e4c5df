package channel

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// GitHub and Zulip cannot run here, so their tests talk to a stand-in that replays the
// services' documented answers: each fixture in testdata/github and testdata/zulip is an HTTP
// response (status line, headers, body) taken from the service's API documentation, with a
// comment block naming its source and what was changed for the scenario. The stand-in checks
// each request against what the test expects (method, path, query, credentials) before
// answering it, and fails the test on any request it did not expect.

// exchange is one expected request and the recorded answer replayed to it.
type exchange struct {
	method, path string
	query        url.Values // each key given must have exactly these values
	fixture      string     // under testdata/
	vars         map[string]string
	check        func(t *testing.T, r *http.Request, body []byte)
}

type standIn struct {
	t      *testing.T
	srv    *httptest.Server
	auth   func(r *http.Request) bool
	mu     sync.Mutex
	script []exchange
}

func newStandIn(t *testing.T, auth func(r *http.Request) bool) *standIn {
	t.Helper()
	s := &standIn{t: t, auth: auth}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.script) > 0 {
			t.Errorf("the stand-in expected %d more request(s), first %s %s", len(s.script), s.script[0].method, s.script[0].path)
		}
	})
	return s
}

// expect queues answers, in order.
func (s *standIn) expect(ex ...exchange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, ex...)
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.t.Logf("stand-in: %s %s", r.Method, r.URL)
	s.mu.Lock()
	if len(s.script) == 0 {
		s.mu.Unlock()
		s.t.Errorf("unexpected request %s %s", r.Method, r.URL)
		http.Error(w, "unexpected", http.StatusTeapot)
		return
	}
	ex := s.script[0]
	s.script = s.script[1:]
	s.mu.Unlock()
	if r.Method != ex.method || r.URL.Path != ex.path {
		s.t.Errorf("request %s %s, want %s %s", r.Method, r.URL.Path, ex.method, ex.path)
	}
	q := r.URL.Query()
	for k, want := range ex.query {
		if got := q[k]; strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			s.t.Errorf("%s %s: query %s = %q, want %q", r.Method, r.URL.Path, k, got, want)
		}
	}
	if !s.auth(r) {
		s.t.Errorf("%s %s: wrong or missing credentials (Authorization %q)", r.Method, r.URL.Path, r.Header.Get("Authorization"))
	}
	if r.Header.Get("User-Agent") != "cryochamber" {
		s.t.Errorf("%s %s: User-Agent %q", r.Method, r.URL.Path, r.Header.Get("User-Agent"))
	}
	if ex.check != nil {
		ex.check(s.t, r, body)
	}
	resp := loadFixture(s.t, ex.fixture, s.srv.URL, ex.vars)
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// loadFixture reads a recorded response: a comment block of "# " lines (its source), then the
// response as it travels. {{base}} is the stand-in's URL; vars fill the other {{name}}s.
func loadFixture(t *testing.T, name, base string, vars map[string]string) *http.Response {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if !strings.HasPrefix(text, "# Source: ") {
		t.Fatalf("fixture %s does not start with its source", name)
	}
	for strings.HasPrefix(text, "#") {
		_, text, _ = strings.Cut(text, "\n")
	}
	text = strings.ReplaceAll(text, "{{base}}", base)
	for k, v := range vars {
		text = strings.ReplaceAll(text, "{{"+k+"}}", v)
	}
	if i := strings.Index(text, "{{"); i >= 0 {
		t.Fatalf("fixture %s: unfilled %q", name, text[i:min(len(text), i+20)])
	}
	head, body, _ := strings.Cut(text, "\n\n")
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n")), nil)
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	resp.Body = io.NopCloser(strings.NewReader(body))
	return resp
}
