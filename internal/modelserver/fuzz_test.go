package modelserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzServe sends arbitrary bodies to every endpoint: the server answers 200 or 400, never
// panics, and what it answers 200 to is a well-formed reply.
func FuzzServe(f *testing.F) {
	f.Add(uint8(0), []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add(uint8(1), []byte(`{"model":"m","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}]}`))
	f.Add(uint8(2), []byte(`{"stream":false,"messages":[{"role":"user","content":[{"type":"text","text":null}]}]}`))
	f.Add(uint8(3), []byte(`{"messages":[]}`))
	f.Add(uint8(5), []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"{\"cmd\":\"ls\"}"},{"role":"tool","tool_call_id":"c","content":"x"}]}`))
	f.Add(uint8(7), []byte(`{"stream":true,"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"o"}]}],"tools":[{"name":"t"}]}`))
	paths := []string{"/v1/messages", "/v1/responses", "/v1/chat/completions", "/v1/messages/count_tokens", "/v1/models"}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		s := New()
		s.MaxBody = 1 << 16
		s.Script(func(r Request) Reply {
			// Echo the user's text back, cut small: invalid UTF-8 in it must not break the stream.
			// On every other request it is also a tool call's input, JSON or not.
			rep := SplitEvery(r.UserText(), 3)
			if which%2 == 1 {
				rep.Calls = []ToolCall{{Name: r.UserText(), Input: json.RawMessage(r.UserText())}}
			}
			return rep
		})
		p := paths[int(which)%len(paths)]
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, p, bytes.NewReader(body)))
		reqs := s.Requests()
		if len(reqs) != 1 {
			t.Fatalf("recorded %d requests", len(reqs))
		}
		r := reqs[0]
		_, _ = r.UserTexts()
		_, _ = r.ToolResults()
		_, _ = r.Tools()
		switch rec.Code {
		case http.StatusOK:
			if r.Err != "" {
				t.Fatalf("answered 200 to a request with Err %q", r.Err)
			}
			out := rec.Body.Bytes()
			if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
				for _, line := range strings.Split(string(out), "\n") {
					if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" && !json.Valid([]byte(d)) {
						t.Fatalf("event data is not JSON: %q", d)
					}
				}
			} else if !json.Valid(out) {
				t.Fatalf("reply is not JSON: %q", out)
			}
		case http.StatusBadRequest:
			if r.Err == "" || !strings.Contains(rec.Body.String(), "modelserver: ") {
				t.Fatalf("400 without a reason: %q / %q", r.Err, rec.Body.String())
			}
		case http.StatusNotFound:
			if r.IsModel() {
				t.Fatalf("404 for a model request")
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	})
}

// FuzzSplitEvery: the pieces put together are the text, none is longer than asked (at least a
// character), and valid UTF-8 is never cut inside a character.
func FuzzSplitEvery(f *testing.F) {
	f.Add("[CRYO:EXIT 0] ok", 5)
	f.Add("aé日本\U0001F600", 4)
	f.Add("\xff\xfe\x80", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n > 1<<20 || n < -1<<20 {
			return
		}
		parts := SplitEvery(s, n).Chunks
		if got := strings.Join(parts, ""); got != s {
			t.Fatalf("joined %q, want %q", got, s)
		}
		limit := max(n, utf8.UTFMax)
		for _, p := range parts {
			if len(p) > limit {
				t.Fatalf("piece of %d bytes, limit %d", len(p), limit)
			}
			if s != "" && p == "" {
				t.Fatalf("empty piece in %q", parts)
			}
			if utf8.ValidString(s) && !utf8.ValidString(p) {
				t.Fatalf("piece %q cut inside a character", p)
			}
		}
	})
}
