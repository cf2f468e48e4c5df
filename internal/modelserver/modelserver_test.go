package modelserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// start runs a server for one test, closed at its end.
func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// do sends one request with a plain HTTP client and returns the status and the whole body.
func do(t *testing.T, s *Server, method, path, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, data
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", p, got, want)
	}
}

// event is one server-sent event.
type event struct {
	name string
	data string
}

// parseSSE splits a stream into events and checks that each is well formed.
func parseSSE(t *testing.T, body []byte) []event {
	t.Helper()
	var out []event
	var cur event
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data == "" {
				t.Fatalf("event without data: %+v", cur)
			}
			out = append(out, cur)
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("not an SSE line: %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != (event{}) {
		t.Fatalf("stream ends inside an event: %+v", cur)
	}
	return out
}

func field(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("event data %q: %v", data, err)
	}
	return m
}

// path walks a decoded JSON value: string keys index objects, ints index arrays.
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// deltas reads the text pieces of a stream, as a client of each API would, and checks the
// events that frame them.
func deltas(t *testing.T, k Kind, body []byte) []string {
	t.Helper()
	evs := parseSSE(t, body)
	if len(evs) == 0 {
		t.Fatal("empty stream")
	}
	var out []string
	switch k {
	case Anthropic:
		if evs[0].name != "message_start" || evs[len(evs)-1].name != "message_stop" {
			t.Errorf("stream from %s to %s, want message_start to message_stop", evs[0].name, evs[len(evs)-1].name)
		}
		for _, e := range evs {
			m := field(t, e.data)
			if m["type"] != e.name {
				t.Errorf("event %s has type %v", e.name, m["type"])
			}
			if e.name == "content_block_delta" {
				out = append(out, path(m, "delta", "text").(string))
			}
		}
	case Responses:
		last := field(t, evs[len(evs)-1].data)
		if evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
			t.Errorf("stream from %s to %s, want response.created to response.completed", evs[0].name, evs[len(evs)-1].name)
		}
		for i, e := range evs {
			m := field(t, e.data)
			if m["type"] != e.name || m["sequence_number"] != float64(i) {
				t.Errorf("event %d %s has type %v, sequence_number %v", i, e.name, m["type"], m["sequence_number"])
			}
			if e.name == "response.output_text.delta" {
				out = append(out, m["delta"].(string))
			}
		}
		if got, want := path(last, "response", "output", 0, "content", 0, "text"), strings.Join(out, ""); got != want {
			t.Errorf("response.completed carries %q, the deltas %q", got, want)
		}
	case Chat:
		if evs[len(evs)-1].data != "[DONE]" {
			t.Errorf("stream ends with %q, want [DONE]", evs[len(evs)-1].data)
		}
		for _, e := range evs[:len(evs)-1] {
			if e.name != "" {
				t.Errorf("chat stream has a named event %q", e.name)
			}
			m := field(t, e.data)
			if c, ok := path(m, "choices", 0, "delta", "content").(string); ok && c != "" {
				out = append(out, c)
			}
		}
	}
	return out
}

// whole reads the text of a reply that was not streamed.
func whole(t *testing.T, k Kind, body []byte) string {
	t.Helper()
	m := field(t, string(body))
	var v any
	switch k {
	case Anthropic:
		v = path(m, "content", 0, "text")
	case Responses:
		v = path(m, "output", 0, "content", 0, "text")
	case Chat:
		v = path(m, "choices", 0, "message", "content")
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("no reply text in %s", body)
	}
	return s
}

func TestAPIs(t *testing.T) {
	reply := SplitEvery("Done: é 日本.\n[CRYO:WAKE +8s]\n[CRYO:EXIT 0] ok\n", 6)
	user := "do the [CRYO:PLAN] thing"
	tests := []struct {
		name string
		kind Kind
		path string
		body string
	}{
		{"anthropic-stream", Anthropic, "/v1/messages?beta=true", `{"model":"claude-x","stream":true,"system":"sys","messages":[{"role":"user","content":[{"type":"text","text":"` + user + `"}]}]}`},
		{"anthropic", Anthropic, "/v1/messages", `{"model":"claude-x","messages":[{"role":"user","content":"` + user + `"}]}`},
		{"responses-stream", Responses, "/v1/responses", `{"model":"gpt-5.5","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + user + `"}]}]}`},
		{"responses", Responses, "/v1/responses", `{"model":"gpt-5.5","input":"` + user + `"}`},
		{"chat-stream", Chat, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"system","content":"sys"},{"role":"user","content":"` + user + `"}]}`},
		{"chat-stream-usage", Chat, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + user + `"}]}`},
		{"chat", Chat, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"` + user + `"}]}]}`},
		{"chat-no-v1", Chat, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + user + `"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t)
			s.Enqueue(reply)
			status, hdr, body := do(t, s, http.MethodPost, tt.path, tt.body, "Authorization", "Bearer sk-test")
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			golden(t, tt.name, body)
			stream := strings.Contains(tt.body, `"stream":true`)
			if stream {
				if ct := hdr.Get("Content-Type"); ct != "text/event-stream" {
					t.Errorf("Content-Type %q, want text/event-stream", ct)
				}
				// Each chunk is its own delta: the markers arrive cut in pieces.
				if got := deltas(t, tt.kind, body); !reflect.DeepEqual(got, reply.Chunks) {
					t.Errorf("deltas %q, want %q", got, reply.Chunks)
				}
			} else if got := whole(t, tt.kind, body); got != reply.String() {
				t.Errorf("reply %q, want %q", got, reply.String())
			}

			reqs := s.Requests()
			if len(reqs) != 1 {
				t.Fatalf("recorded %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Seq != 1 || r.Kind != tt.kind || r.Method != http.MethodPost || r.Stream != stream || r.Err != "" || !r.IsModel() {
				t.Errorf("recorded %+v", r)
			}
			if string(r.Body) != tt.body || r.Header.Get("Authorization") != "Bearer sk-test" {
				t.Errorf("recorded body %q, Authorization %q", r.Body, r.Header.Get("Authorization"))
			}
			if wantPath, wantQuery, _ := strings.Cut(tt.path, "?"); r.Path != wantPath || r.Query != wantQuery {
				t.Errorf("recorded path %q query %q", r.Path, r.Query)
			}
			if r.Model == "" || r.Time.IsZero() {
				t.Errorf("recorded model %q, time %v", r.Model, r.Time)
			}
			if got := r.UserText(); got != user {
				t.Errorf("UserText() = %q, want %q", got, user)
			}
		})
	}
}

func TestQueueAndScript(t *testing.T) {
	s := start(t)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	s.Enqueue(Text("one"), Text("two"))
	for _, want := range []string{"one", "two"} {
		_, _, got := do(t, s, http.MethodPost, "/v1/chat/completions", body)
		if w := whole(t, Chat, got); w != want {
			t.Errorf("reply %q, want %q", w, want)
		}
	}
	// An empty queue is an error the CLI shows, naming the request.
	status, _, got := do(t, s, http.MethodPost, "/v1/chat/completions", body)
	if status != http.StatusInternalServerError || !strings.Contains(string(got), "no scripted reply left for request 3") {
		t.Errorf("empty queue: status %d, body %s", status, got)
	}
	// A script takes precedence over the queue and sees the request.
	s.Enqueue(Text("queued"))
	s.Script(func(r Request) Reply { return Text(fmt.Sprintf("seq %d says %s", r.Seq, r.UserText())) })
	_, _, got = do(t, s, http.MethodPost, "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
	if w := whole(t, Anthropic, got); w != "seq 4 says hello" {
		t.Errorf("scripted reply %q", w)
	}
	s.Script(nil)
	_, _, got = do(t, s, http.MethodPost, "/v1/messages", `{"model":"m","messages":[]}`)
	if w := whole(t, Anthropic, got); w != "queued" {
		t.Errorf("after Script(nil): reply %q, want the queue's", w)
	}
	if n := len(s.ModelRequests()); n != 5 {
		t.Errorf("ModelRequests() has %d, want 5", n)
	}
}

func TestFailure(t *testing.T) {
	tests := []struct {
		path string
		want string // the error in the API's own shape
	}{
		{"/v1/messages", `{"error":{"message":"slow down","type":"api_error"},"type":"error"}`},
		{"/v1/responses", `{"error":{"code":null,"message":"slow down","param":null,"type":"server_error"}}`},
		{"/v1/chat/completions", `{"error":{"code":null,"message":"slow down","param":null,"type":"server_error"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			s := start(t)
			s.Enqueue(Failure(http.StatusTooManyRequests, "slow down"))
			status, _, body := do(t, s, http.MethodPost, tt.path, `{"model":"m","stream":true}`)
			if status != http.StatusTooManyRequests || string(body) != tt.want {
				t.Errorf("status %d body %s, want 429 %s", status, body, tt.want)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		header     []string
		wantStatus int
		wantErr    string // in the answer and in Request.Err
	}{
		{"not JSON", "POST", "/v1/messages", `{"model":`, nil, 400, "decode body: unexpected end of JSON input"},
		{"wrong type", "POST", "/v1/responses", `{"model":7}`, nil, 400, "decode body: json: cannot unmarshal number"},
		{"too large", "POST", "/v1/chat/completions", `{"model":"m","pad":"` + strings.Repeat("x", 100) + `"}`, nil, 400, "body over 64 bytes"},
		{"compressed", "POST", "/v1/messages", `{}`, []string{"Content-Encoding", "zstd"}, 400, "unsupported Content-Encoding zstd"},
		{"unknown endpoint", "POST", "/v1/embeddings", `{}`, nil, 404, "no such endpoint: POST /v1/embeddings"},
		{"GET a model endpoint", "GET", "/v1/messages", ``, nil, 404, "no such endpoint: GET /v1/messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t)
			s.MaxBody = 64
			s.Enqueue(Text("never sent"))
			status, _, body := do(t, s, tt.method, tt.path, tt.body, tt.header...)
			if status != tt.wantStatus || !strings.Contains(string(body), tt.wantErr) {
				t.Errorf("status %d body %s, want %d with %q", status, body, tt.wantStatus, tt.wantErr)
			}
			reqs := s.Requests()
			if len(reqs) != 1 {
				t.Fatalf("recorded %d requests, want 1", len(reqs))
			}
			if tt.wantStatus == 400 && !strings.Contains(reqs[0].Err, tt.wantErr) {
				t.Errorf("Request.Err = %q, want %q", reqs[0].Err, tt.wantErr)
			}
			if tt.wantStatus == 404 && reqs[0].Kind != Aux {
				t.Errorf("Kind = %q, want aux", reqs[0].Kind)
			}
		})
	}
}

func TestAux(t *testing.T) {
	s := start(t)
	status, _, body := do(t, s, http.MethodGet, "/v1/models", "")
	if status != 200 {
		t.Fatalf("GET /v1/models: %d %s", status, body)
	}
	golden(t, "models", body)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Type, Object string
		} `json:"data"`
		HasMore bool   `json:"has_more"`
		LastID  string `json:"last_id"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
		if m.Type != "model" || m.Object != "model" {
			t.Errorf("model %s: type %q object %q", m.ID, m.Type, m.Object)
		}
	}
	if !reflect.DeepEqual(ids, ModelNames) || list.Object != "list" || list.HasMore || list.LastID != "cryo-model" {
		t.Errorf("model list %+v", list)
	}
	if status, _, body := do(t, s, http.MethodGet, "/v1/models/gpt-5.5", ""); status != 200 || !strings.Contains(string(body), `"id":"gpt-5.5"`) {
		t.Errorf("GET /v1/models/gpt-5.5: %d %s", status, body)
	}
	if status, _, body := do(t, s, http.MethodPost, "/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"hello there"}]}`); status != 200 || !strings.Contains(string(body), `"input_tokens":`) {
		t.Errorf("count_tokens: %d %s", status, body)
	}
	if status, _, _ := do(t, s, http.MethodHead, "/", ""); status != 200 {
		t.Errorf("HEAD /: %d", status)
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("recorded %d requests, want 4", n)
	}
	if n := len(s.ModelRequests()); n != 0 {
		t.Errorf("%d model requests among the auxiliary ones", n)
	}
}

func TestUserTexts(t *testing.T) {
	tests := []struct {
		name    string
		kind    Kind
		body    string
		want    []string
		wantErr string
	}{
		{"anthropic string", Anthropic, `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`, []string{"a", "c"}, ""},
		{"anthropic parts", Anthropic, `{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},{"type":"text","text":""}]}]}`, []string{"a", ""}, ""},
		{"anthropic no messages", Anthropic, `{}`, nil, ""},
		{"anthropic bad content", Anthropic, `{"messages":[{"role":"user","content":7}]}`, nil, "decode message content"},
		{"anthropic bad messages", Anthropic, `{"messages":{}}`, nil, "decode messages"},
		{"chat parts", Chat, `{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"user","content":null}]}`, []string{"x"}, ""},
		{"responses string input", Responses, `{"input":"whole"}`, []string{"whole"}, ""},
		{"responses items", Responses, `{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"d"}]},{"role":"user","content":"u1"},{"type":"message","role":"user","content":[{"type":"input_text","text":"u2"}]},{"type":"function_call_output","output":"o"}]}`, []string{"u1", "u2"}, ""},
		{"responses bad input", Responses, `{"input":{}}`, nil, "decode input items"},
		{"not JSON", Chat, `{`, nil, "decode messages"},
		{"not a model request", Aux, `{}`, nil, "is not a model request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Seq: 3, Method: "POST", Path: "/x", Kind: tt.kind, Body: []byte(tt.body)}
			got, err := r.UserTexts()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				if r.UserText() != "" {
					t.Errorf("UserText() = %q after an error, want empty", r.UserText())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("UserTexts() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSplitEvery(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 5, []string{""}},
		{"abc", 5, []string{"abc"}},
		{"abcdefgh", 4, []string{"abcd", "efgh"}},
		{"[CRYO:EXIT 0]", 5, []string{"[CRYO", ":EXIT", " 0]"}},
		{"abcdef", 1, []string{"abcd", "ef"}}, // at least one character (4 bytes) per piece
		{"aé日本", 4, []string{"aé", "日", "本"}}, // never inside a character
		{"\x80\x80\x80\x80\x80", 4, []string{"\x80\x80\x80\x80", "\x80"}},
	}
	for _, tt := range tests {
		if got := SplitEvery(tt.s, tt.n).Chunks; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SplitEvery(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
	if got := Chunked("a", "b").String(); got != "ab" {
		t.Errorf("Chunked.String() = %q", got)
	}
}

func TestWait(t *testing.T) {
	s := start(t)
	s.Enqueue(Text("x"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Wait(ctx, func(r []Request) bool { return len(r) > 0 })
	if err == nil || !strings.Contains(err.Error(), "waiting for requests (have 0)") {
		t.Errorf("Wait without requests: %v", err)
	}
	go func() {
		resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := s.Wait(ctx2, func(r []Request) bool { return len(r) == 1 && r[0].Kind == Chat }); err != nil {
		t.Errorf("Wait for a request that comes: %v", err)
	}
}

// A CLI in a retry loop: the count goes on, the recording stops at MaxRequests.
func TestMaxRequests(t *testing.T) {
	s := New()
	for i := 0; i < MaxRequests+5; i++ {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/models", nil))
	}
	reqs := s.Requests()
	if len(reqs) != MaxRequests || reqs[len(reqs)-1].Seq != MaxRequests {
		t.Errorf("recorded %d requests (last seq %d), want %d", len(reqs), reqs[len(reqs)-1].Seq, MaxRequests)
	}
	s.Enqueue(Text("x"))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{}`)))
	if !strings.Contains(rec.Body.String(), `"id":"msg_10006"`) {
		t.Errorf("request after the limit: %s", rec.Body.String())
	}
	if s.Close() != nil {
		t.Error("Close of a server that never listened failed")
	}
}

// BenchmarkStream measures one streamed reply of 64 KiB in 1 KiB chunks.
func BenchmarkStream(b *testing.B) {
	s := New()
	s.Script(func(Request) Reply { return SplitEvery(strings.Repeat("x", 64<<10), 1<<10) })
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for i := 0; i < b.N; i++ {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body)))
	}
}
