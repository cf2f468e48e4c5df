package fallback

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is an HTTP server on 127.0.0.1 that records every request and answers with the
// handler of the attempt (the last handler repeats).
type recorder struct {
	srv      *httptest.Server
	mu       sync.Mutex
	reqs     []recorded
	handlers []http.HandlerFunc
}

type recorded struct {
	method string
	path   string
	header http.Header
	body   []byte
}

func newRecorder(t *testing.T, handlers ...http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{handlers: handlers}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), body: body})
	n := len(r.reqs)
	r.mu.Unlock()
	h := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	if len(r.handlers) > 0 {
		h = r.handlers[min(n, len(r.handlers))-1]
	}
	h(w, req)
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// fast is a test config: small backoff, so retries do not slow the suite.
func fast(retries int) WebhookConfig {
	return WebhookConfig{Timeout: 5 * time.Second, Retries: retries, Backoff: time.Millisecond}
}

func TestPostWebhookBodyAndSignature(t *testing.T) {
	secret := []byte("shared-secret")
	for _, signed := range []bool{false, true} {
		t.Run("signed="+strconv.FormatBool(signed), func(t *testing.T) {
			rec := newRecorder(t)
			cfg := fast(0)
			if signed {
				cfg.Secret = secret
			}
			if err := PostWebhook(context.Background(), cfg, rec.srv.URL+"/hooks/abc?x=1", testAlert); err != nil {
				t.Fatalf("PostWebhook: %v", err)
			}
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != http.MethodPost || r.path != "/hooks/abc" {
				t.Errorf("request %s %s, want POST /hooks/abc", r.method, r.path)
			}
			for k, want := range map[string]string{"Content-Type": "application/json", "User-Agent": "cryochamber"} {
				if got := r.header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			var got map[string]any
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, r.body)
			}
			want := map[string]any{
				"chamber": testAlert.Chamber,
				"session": float64(testAlert.Session),
				"reason":  testAlert.Reason,
				"message": testAlert.Message,
				"time":    "2026-11-22T10:04:51Z",
				"text":    Text(testAlert),
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("body = %v\nwant %v", got, want)
			}
			sig, ts := r.header.Get(SignatureHeader), r.header.Get(TimestampHeader)
			if !signed {
				if sig != "" || ts != "" {
					t.Errorf("unsigned request has signature %q, timestamp %q", sig, ts)
				}
				return
			}
			// Verify as the package doc tells a receiver to.
			hexSig, ok := strings.CutPrefix(sig, "sha256=")
			if !ok || !hmac.Equal([]byte(sig), []byte(Sign(secret, r.body))) {
				t.Errorf("signature %q does not verify over the received body", sig)
			}
			if len(hexSig) != 64 {
				t.Errorf("signature %q is not 32 bytes of hex", sig)
			}
			if Sign([]byte("other"), r.body) == sig {
				t.Error("signature does not depend on the secret")
			}
			if ts != strconv.FormatInt(testAlert.Time.Unix(), 10) {
				t.Errorf("timestamp = %q, want %d", ts, testAlert.Time.Unix())
			}
		})
	}
}

func TestPostWebhookRetries(t *testing.T) {
	// hijackClose closes the connection without an answer.
	hijackClose := func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}
	tests := []struct {
		name     string
		handlers []http.HandlerFunc
		retries  int
		wantReqs int
		wantErr  []string // nil = success
	}{
		{name: "500 then 200", handlers: []http.HandlerFunc{status(500, "busy"), status(200, "")}, retries: 3, wantReqs: 2},
		{name: "503 twice then 204", handlers: []http.HandlerFunc{status(503, ""), status(503, ""), status(204, "")}, retries: 2, wantReqs: 3},
		{name: "closed connection then 200", handlers: []http.HandlerFunc{hijackClose, status(200, "")}, retries: 1, wantReqs: 2},
		{name: "400 is not retried", handlers: []http.HandlerFunc{status(400, "invalid_payload: text missing")}, retries: 3, wantReqs: 1,
			wantErr: []string{"400 Bad Request", "invalid_payload: text missing"}},
		{name: "404 is not retried", handlers: []http.HandlerFunc{status(404, "no_service")}, retries: 3, wantReqs: 1,
			wantErr: []string{"404 Not Found", "no_service"}},
		{name: "always 500", handlers: []http.HandlerFunc{status(500, "down\nfor\tmaintenance")}, retries: 2, wantReqs: 3,
			wantErr: []string{"failed 3 attempts", "500 Internal Server Error: down for maintenance"}},
		{name: "no retries configured", handlers: []http.HandlerFunc{status(502, "")}, retries: 0, wantReqs: 1,
			wantErr: []string{"502 Bad Gateway"}},
		{name: "negative retries", handlers: []http.HandlerFunc{status(502, "")}, retries: -4, wantReqs: 1,
			wantErr: []string{"502 Bad Gateway"}},
		{name: "always closed", handlers: []http.HandlerFunc{hijackClose}, retries: 1, wantReqs: 2,
			wantErr: []string{"failed 2 attempts", "EOF"}},
		{name: "redirect without Location is not retried", handlers: []http.HandlerFunc{status(302, "")}, retries: 3, wantReqs: 1,
			wantErr: []string{"302 Found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, tt.handlers...)
			err := PostWebhook(context.Background(), fast(tt.retries), rec.srv.URL+"/secret-path", testAlert)
			if n := len(rec.requests()); n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("PostWebhook: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("PostWebhook succeeded, want an error")
			}
			for _, w := range append(tt.wantErr, rec.srv.URL+"/...") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret-path") {
				t.Errorf("error %q shows the URL's path, which may be its credential", err)
			}
		})
	}
}

func TestPostWebhookTimeoutThenSuccess(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done(): // the client gave up
		case <-release:
		}
	}
	rec := newRecorder(t, slow, status(200, ""))
	cfg := WebhookConfig{Timeout: 200 * time.Millisecond, Retries: 1, Backoff: time.Millisecond}
	if err := PostWebhook(context.Background(), cfg, rec.srv.URL, testAlert); err != nil {
		t.Fatalf("PostWebhook: %v", err)
	}
	if n := len(rec.requests()); n != 2 {
		t.Errorf("%d requests, want 2 (one timed out, one answered)", n)
	}

	t.Run("every attempt times out", func(t *testing.T) {
		rec := newRecorder(t, slow)
		cfg := WebhookConfig{Timeout: 100 * time.Millisecond, Retries: 1, Backoff: time.Millisecond}
		err := PostWebhook(context.Background(), cfg, rec.srv.URL, testAlert)
		if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") {
			t.Fatalf("error = %v, want a timeout", err)
		}
		if n := len(rec.requests()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})
}

func TestPostWebhookContext(t *testing.T) {
	t.Run("cancelled during an attempt: no retry", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hang := func(w http.ResponseWriter, r *http.Request) {
			cancel()
			<-r.Context().Done()
		}
		rec := newRecorder(t, hang)
		err := PostWebhook(ctx, WebhookConfig{Timeout: time.Hour, Retries: 5, Backoff: time.Millisecond}, rec.srv.URL, testAlert)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		if n := len(rec.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("context ends during the backoff", func(t *testing.T) {
		// The attempt takes milliseconds; the context ends long before the hour of backoff.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		rec := newRecorder(t, status(500, "busy"))
		err := PostWebhook(ctx, WebhookConfig{Retries: 5, Backoff: time.Hour}, rec.srv.URL, testAlert)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "after 1 of 6 attempts (last: status 500") {
			t.Fatalf("error = %v, want the deadline during the backoff and the last status", err)
		}
		if n := len(rec.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

func TestPostWebhookRedirects(t *testing.T) {
	redirectTo := func(loc func() string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc())
			w.WriteHeader(http.StatusTemporaryRedirect)
		}
	}
	t.Run("to ftp is refused", func(t *testing.T) {
		rec := newRecorder(t, redirectTo(func() string { return "ftp://127.0.0.1/upload" }))
		err := PostWebhook(context.Background(), fast(3), rec.srv.URL, testAlert)
		if err == nil || !strings.Contains(err.Error(), `refusing a redirect to scheme "ftp"`) {
			t.Fatalf("error = %v, want the ftp redirect refused", err)
		}
		if n := len(rec.requests()); n != 1 {
			t.Errorf("%d requests, want 1 (a refused redirect is not retried)", n)
		}
	})
	t.Run("307 to another path is followed with the body", func(t *testing.T) {
		var rec *recorder
		rec = newRecorder(t, redirectTo(func() string { return rec.srv.URL + "/moved" }), status(200, ""))
		if err := PostWebhook(context.Background(), fast(0), rec.srv.URL, testAlert); err != nil {
			t.Fatalf("PostWebhook: %v", err)
		}
		reqs := rec.requests()
		if len(reqs) != 2 || reqs[1].path != "/moved" || reqs[1].method != http.MethodPost || len(reqs[1].body) == 0 {
			t.Fatalf("requests = %+v, want the POST repeated at /moved", reqs)
		}
	})
	t.Run("three redirects are followed, four are not", func(t *testing.T) {
		for _, hops := range []int{3, 4} {
			var rec *recorder
			var n atomic.Int32
			hop := redirectTo(func() string { return rec.srv.URL + "/hop" + strconv.Itoa(int(n.Add(1))) })
			handlers := []http.HandlerFunc{}
			for range hops {
				handlers = append(handlers, hop)
			}
			rec = newRecorder(t, append(handlers, status(200, ""))...)
			err := PostWebhook(context.Background(), fast(0), rec.srv.URL, testAlert)
			if hops == 3 && err != nil {
				t.Fatalf("3 redirects: %v", err)
			}
			if hops == 4 && (err == nil || !strings.Contains(err.Error(), "stopped after 3 redirects")) {
				t.Fatalf("4 redirects: error = %v, want stopped after 3", err)
			}
		}
	})
	t.Run("https down to http is refused", func(t *testing.T) {
		plain := newRecorder(t)
		tlsSrv := httptest.NewTLSServer(redirectTo(func() string { return plain.srv.URL + "/x" }))
		defer tlsSrv.Close()
		cfg := fast(0)
		cfg.Client = tlsSrv.Client()
		err := PostWebhook(context.Background(), cfg, tlsSrv.URL, testAlert)
		if err == nil || !strings.Contains(err.Error(), "refusing a redirect from https to http") {
			t.Fatalf("error = %v, want the downgrade refused", err)
		}
		if n := len(plain.requests()); n != 0 {
			t.Errorf("the http server got %d requests, want none", n)
		}
	})
	t.Run("https with an untrusted certificate is not retried", func(t *testing.T) {
		var hits atomic.Int32
		var handshakes atomic.Int32
		tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		tlsSrv.Config.ConnState = func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				handshakes.Add(1)
			}
		}
		tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
		tlsSrv.StartTLS()
		defer tlsSrv.Close()
		err := PostWebhook(context.Background(), fast(3), tlsSrv.URL, testAlert) // default client: system roots
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("error = %v, want a certificate error", err)
		}
		if hits.Load() != 0 {
			t.Error("the request reached the handler over an untrusted connection")
		}
		if n := handshakes.Load(); n != 1 {
			t.Errorf("%d connections, want 1 (not retried)", n)
		}
	})
}

func TestPostWebhookRefusesURL(t *testing.T) {
	rec := newRecorder(t)
	host := rec.srv.Listener.Addr().String()
	tests := []struct {
		url  string
		want string
	}{
		{url: "ftp://" + host + "/x", want: `scheme "ftp" is not http or https`},
		{url: "file:///etc/passwd", want: `scheme "file"`},
		{url: "javascript:alert(1)", want: `scheme "javascript"`},
		{url: "gopher://" + host + "/", want: `scheme "gopher"`},
		{url: host + "/x", want: "first path segment in URL cannot contain colon"},
		{url: "//" + host + "/x", want: `scheme ""`},
		{url: "", want: `scheme ""`},
		{url: "http:///nohost", want: "has no host"},
		{url: "http://" + host + "/a b", want: "space or control character"},
		{url: "http://" + host + "/\r\nX: y", want: "space or control character"},
		{url: "http://" + host + "/" + strings.Repeat("a", 3000), want: "longer than 2048"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := PostWebhook(context.Background(), fast(3), tt.url, testAlert)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("%d requests were made, want none", n)
	}
}

// TestPostWebhookBoundedRead: a huge error answer is read only up to its bound, and only its
// start reaches the error.
func TestPostWebhookBoundedRead(t *testing.T) {
	const total = 1 << 30
	written := make(chan int64, 1)
	huge := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		chunk := []byte(strings.Repeat("x", 32<<10))
		var n int64
		for n < total {
			m, err := w.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
		}
		written <- n
	}
	rec := newRecorder(t, huge)
	err := PostWebhook(context.Background(), fast(0), rec.srv.URL, testAlert)
	if err == nil || !strings.Contains(err.Error(), "400 Bad Request: xxxx") {
		t.Fatalf("error = %v, want the 400 with the start of the body", err)
	}
	if len(err.Error()) > 400 {
		t.Errorf("error is %d bytes, want only the start of the answer", len(err.Error()))
	}
	select {
	case n := <-written:
		// Socket buffers hold some megabytes; an unbounded read would take all of it.
		if n >= total/4 {
			t.Errorf("the server could write %d bytes, want the client to stop reading", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server is still writing: the client did not close the connection")
	}
}
