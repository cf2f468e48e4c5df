// Package modelserver is a scripted model server for tests: an HTTP server on 127.0.0.1 that
// speaks enough of the Anthropic Messages API, the OpenAI Responses API and OpenAI Chat
// Completions for the real agent CLIs (Claude Code, Codex CLI, opencode) to run a whole session
// against it. Each model request gets a scripted reply (from a queue or a function of the
// request): text, streamed as server-sent events or sent whole as the request asks, cut into
// stream chunks where the script says (so that a marker can arrive split across chunks), and
// optionally tool calls, which the CLI runs (or refuses) and answers in its next request
// (Request.ToolResults). Every request, model or auxiliary, is recorded with its path, headers
// and body for assertions.
//
// It never calls a real model, never listens beyond the loopback interface, and never runs a
// tool itself: a tool call is only text in a reply, and what happens to it is the CLI's doing.
package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultMaxBody bounds one request body. The CLIs send their whole system prompt and tool list
// with every request (Claude Code: about 50 KiB); a test prompt of a few hundred KiB comes on top.
const DefaultMaxBody = 32 << 20

// MaxRequests bounds how many requests are recorded; later ones are answered and counted but
// their bodies are not kept (a CLI stuck in a retry loop must not eat the test's memory).
const MaxRequests = 10000

// Kind says which API a request spoke.
type Kind string

const (
	Anthropic Kind = "anthropic" // POST /v1/messages
	Responses Kind = "responses" // POST /v1/responses
	Chat      Kind = "chat"      // POST /v1/chat/completions
	Aux       Kind = "aux"       // anything else: model lists, token counts, probes
)

// Request is one recorded request.
type Request struct {
	Seq    int       // 1, 2, ... in arrival order, over all requests
	Time   time.Time // when it arrived
	Method string
	Path   string // without the query
	Query  string
	Header http.Header
	Body   []byte
	Kind   Kind
	// For model requests (Kind Anthropic, Responses, Chat), from the body:
	Model  string
	Stream bool
	// Err is why the body could not be read or decoded ("" when it could); such a request is
	// answered with 400.
	Err string
}

// IsModel reports whether r asked the model for a reply.
func (r Request) IsModel() bool { return r.Kind == Anthropic || r.Kind == Responses || r.Kind == Chat }

// Reply is the scripted answer to one model request.
type Reply struct {
	// Chunks is the reply's text in the pieces a stream sends, one delta event each. A reply
	// that is not streamed is their concatenation.
	Chunks []string
	// Calls are tool calls the model makes after its text, in this order. A reply with calls
	// ends its turn for tool use (stop reason "tool_use", "tool_calls"): the CLI runs them and
	// sends the results in its next request.
	Calls []ToolCall
	// Status, when not 0 or 200, answers with that HTTP status and an error body in the
	// request's API format whose message is Error.
	Status int
	Error  string
	// Usage, when set, is the token usage the reply reports (each API's own usage fields);
	// otherwise it is estimated from the request's and the reply's lengths.
	Usage *Tokens
}

// Tokens is the usage a reply reports: tokens read (the prompt) and written.
type Tokens struct{ In, Out int }

// Text is a reply sent as one chunk.
func Text(s string) Reply { return Reply{Chunks: []string{s}} }

// Chunked is a reply whose stream sends exactly these pieces.
func Chunked(parts ...string) Reply { return Reply{Chunks: parts} }

// SplitEvery is a reply cut into pieces of at most n bytes, on UTF-8 character boundaries
// (JSON cannot carry half a character), so that every marker longer than n arrives in parts.
func SplitEvery(s string, n int) Reply {
	if n < utf8.UTFMax {
		n = utf8.UTFMax
	}
	var parts []string
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			i = n // not UTF-8 at all here: cut where asked
		}
		parts = append(parts, s[:i])
		s = s[i:]
	}
	if s != "" || len(parts) == 0 {
		parts = append(parts, s)
	}
	return Reply{Chunks: parts}
}

// ToolCall is one tool call of a scripted reply.
type ToolCall struct {
	// ID names the call; the CLI's result carries it back (ToolResult.CallID). "" gives
	// "call_<request seq>_<index>".
	ID string
	// Name is the tool, as the request offers it (Request.Tools): "Read" (Claude Code), "read"
	// (opencode), "exec_command" (Codex).
	Name string
	// Input is the call's arguments, a JSON object as the tool's schema wants it ("" sends
	// {}; text that is not JSON is sent as a JSON string).
	Input json.RawMessage
}

// Call is a reply that calls one tool with input (marshalled to JSON) and says nothing else.
// It panics if input cannot be marshalled: scripts are written by tests.
func Call(name string, input any) Reply {
	data, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("modelserver: tool call %s: %v", name, err))
	}
	return Reply{Calls: []ToolCall{{Name: name, Input: data}}}
}

// Failure is a reply that fails with an HTTP status and an API error.
func Failure(status int, message string) Reply { return Reply{Status: status, Error: message} }

// String is the whole text of the reply.
func (r Reply) String() string { return strings.Join(r.Chunks, "") }

// ScriptFunc chooses the reply to a model request.
type ScriptFunc func(Request) Reply

// Server is a scripted model server. Its methods are safe for concurrent use; set the exported
// fields before the first request.
type Server struct {
	// URL is the server's base, "http://127.0.0.1:PORT" (the API paths start with /v1); "" for
	// a Server from New that is not listening.
	URL string
	// Models are the model ids the model lists report (default: ModelNames).
	Models []string
	// MaxBody bounds one request body (default DefaultMaxBody); a larger one is refused with 400.
	MaxBody int64
	// Created is the creation time the replies report (default: a fixed time, so that replies
	// are the same on every run).
	Created time.Time

	srv *http.Server

	mu     sync.Mutex
	seq    int
	reqs   []Request
	queue  []Reply
	script ScriptFunc
	notify chan struct{} // closed and replaced when a request is recorded
}

// ModelNames are the ids the model lists report by default: names the CLIs accept without
// complaint (Codex knows a built-in list; the others take any).
var ModelNames = []string{"gpt-5.5", "claude-sonnet-4-5", "cryo-model"}

// New returns a server that is not listening: use it as an http.Handler.
func New() *Server {
	return &Server{
		Models:  slices.Clone(ModelNames),
		MaxBody: DefaultMaxBody,
		Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		notify:  make(chan struct{}),
	}
}

// Start returns a server listening on 127.0.0.1 on a free port, serving until Close.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("modelserver: listen: %w", err)
	}
	s := New()
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and ends every open connection.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

// Enqueue adds replies to the queue. A model request takes the first reply of the queue when no
// ScriptFunc is set.
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r...)
}

// Script sets the function that chooses each model request's reply (nil: use the queue).
func (s *Server) Script(f ScriptFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = f
}

// Requests returns a copy of every request recorded so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ModelRequests returns the recorded requests that asked for a reply.
func (s *Server) ModelRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.IsModel() {
			out = append(out, r)
		}
	}
	return out
}

// Wait blocks until cond holds for the recorded requests or ctx ends.
func (s *Server) Wait(ctx context.Context, cond func([]Request) bool) error {
	for {
		s.mu.Lock()
		reqs := append([]Request(nil), s.reqs...)
		ch := s.notify
		s.mu.Unlock()
		if cond(reqs) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("modelserver: waiting for requests (have %d): %w", len(reqs), ctx.Err())
		}
	}
}

// record stores r (up to MaxRequests) and wakes the waiters.
func (s *Server) record(r *Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r.Seq = s.seq
	if len(s.reqs) < MaxRequests {
		s.reqs = append(s.reqs, *r)
	}
	close(s.notify)
	s.notify = make(chan struct{})
}

// reply chooses the reply to a model request.
func (s *Server) reply(r Request) Reply {
	s.mu.Lock()
	f := s.script
	if f == nil {
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return Failure(http.StatusInternalServerError, fmt.Sprintf("modelserver: no scripted reply left for request %d (%s %s)", r.Seq, r.Method, r.Path))
		}
		rep := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return rep
	}
	s.mu.Unlock()
	return f(r)
}

// ServeHTTP records the request and answers it.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	r := Request{
		Time:   time.Now(),
		Method: hr.Method,
		Path:   hr.URL.Path,
		Query:  hr.URL.RawQuery,
		Header: hr.Header.Clone(),
		Kind:   kindOf(hr.Method, hr.URL.Path),
	}
	body, err := io.ReadAll(io.LimitReader(hr.Body, s.MaxBody+1))
	switch {
	case err != nil:
		r.Err = "read body: " + err.Error()
	case int64(len(body)) > s.MaxBody:
		r.Err = fmt.Sprintf("body over %d bytes", s.MaxBody)
		body = body[:s.MaxBody]
	case hr.Header.Get("Content-Encoding") != "" && hr.Header.Get("Content-Encoding") != "identity":
		r.Err = "unsupported Content-Encoding " + hr.Header.Get("Content-Encoding")
	}
	r.Body = body
	if r.IsModel() && r.Err == "" {
		var head struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			r.Err = "decode body: " + err.Error()
		}
		r.Model, r.Stream = head.Model, head.Stream
	}
	s.record(&r)

	if r.Err != "" {
		writeError(w, r.Kind, http.StatusBadRequest, "modelserver: "+r.Err)
		return
	}
	switch r.Kind {
	case Anthropic, Responses, Chat:
		rep := s.reply(r)
		if rep.Status != 0 && rep.Status != http.StatusOK {
			writeError(w, r.Kind, rep.Status, rep.Error)
			return
		}
		s.answer(w, r, rep)
	default:
		s.aux(w, r)
	}
}

// kindOf routes by path. The SDKs put /v1 in the base URL; some callers omit it, so both are
// accepted.
func kindOf(method, path string) Kind {
	if method != http.MethodPost {
		return Aux
	}
	switch strings.TrimPrefix(path, "/v1") {
	case "/messages":
		return Anthropic
	case "/responses":
		return Responses
	case "/chat/completions":
		return Chat
	}
	return Aux
}

// aux answers the auxiliary endpoints the CLIs call besides the model: model lists and token
// counts. Anything else is a 404 in OpenAI's error format (recorded, like every request).
func (s *Server) aux(w http.ResponseWriter, r Request) {
	p := strings.TrimPrefix(r.Path, "/v1")
	switch {
	case r.Method == http.MethodGet && p == "/models":
		writeJSON(w, http.StatusOK, s.modelList())
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/models/"):
		id := strings.TrimPrefix(p, "/models/")
		writeJSON(w, http.StatusOK, modelEntry(id, s.Created))
	case r.Method == http.MethodPost && p == "/messages/count_tokens":
		// A rough count is all a CLI uses it for (deciding when to compact).
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(r.Body)/4 + 1})
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && (p == "" || p == "/")):
		w.WriteHeader(http.StatusOK)
	default:
		writeError(w, Aux, http.StatusNotFound, fmt.Sprintf("modelserver: no such endpoint: %s %s", r.Method, r.Path))
	}
}

// modelList is a model list that reads right as both OpenAI's (object, data[].id, owned_by) and
// Anthropic's (data[].type, display_name, created_at, has_more, first_id, last_id).
func (s *Server) modelList() map[string]any {
	data := make([]map[string]any, 0, len(s.Models))
	for _, id := range s.Models {
		data = append(data, modelEntry(id, s.Created))
	}
	list := map[string]any{"object": "list", "data": data, "has_more": false}
	if len(s.Models) > 0 {
		list["first_id"], list["last_id"] = s.Models[0], s.Models[len(s.Models)-1]
	}
	return list
}

func modelEntry(id string, t time.Time) map[string]any {
	return map[string]any{
		"id": id, "object": "model", "type": "model", "display_name": id,
		"created": t.Unix(), "created_at": t.UTC().Format(time.RFC3339), "owned_by": "modelserver",
	}
}

// writeError answers with an error body in the API's own format: Anthropic's
// {"type":"error","error":{...}} or OpenAI's {"error":{...}}.
func writeError(w http.ResponseWriter, k Kind, status int, msg string) {
	if k == Anthropic {
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
		return
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": nil, "param": nil}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// sse writes server-sent events and flushes each one, so that chunks really arrive apart.
type sse struct {
	w   http.ResponseWriter
	f   http.Flusher
	err error
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name "" writes a data-only event (Chat Completions).
func (e *sse) event(name string, v any) {
	if e.err != nil {
		return
	}
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	switch v := v.(type) {
	case string:
		fmt.Fprintf(&b, "data: %s\n\n", v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			e.err = err
			return
		}
		fmt.Fprintf(&b, "data: %s\n\n", data)
	}
	if _, err := e.w.Write(b.Bytes()); err != nil {
		e.err = err
		return
	}
	if e.f != nil {
		e.f.Flush()
	}
}

// answer sends rep in the request's API format, streamed or whole: its text first, then its
// tool calls.
func (s *Server) answer(w http.ResponseWriter, r Request, rep Reply) {
	id := fmt.Sprintf("%d", r.Seq)
	model := r.Model
	if model == "" {
		model = "modelserver"
	}
	text := rep.String()
	calls := rep.calls(r.Seq)
	inTok, outTok := len(r.Body)/4+1, len(text)/4+1
	for _, c := range calls {
		outTok += len(c.Input) / 4
	}
	if rep.Usage != nil {
		inTok, outTok = rep.Usage.In, rep.Usage.Out
	}
	// A reply that only calls tools has no text part (the APIs send none either).
	withText := len(calls) == 0 || text != ""
	switch r.Kind {
	case Anthropic:
		stop := "end_turn"
		if len(calls) > 0 {
			stop = "tool_use"
		}
		var content []any
		if withText {
			content = append(content, anthropicText(text))
		}
		for _, c := range calls {
			content = append(content, anthropicToolUse(c, c.Input))
		}
		if !r.Stream {
			writeJSON(w, http.StatusOK, anthropicMessage("msg_"+id, model, content, stop, inTok, outTok))
			return
		}
		e := newSSE(w)
		start := anthropicMessage("msg_"+id, model, []any{}, nil, inTok, 1)
		e.event("message_start", map[string]any{"type": "message_start", "message": start})
		index := 0
		if withText {
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": anthropicText("")})
			e.event("ping", map[string]any{"type": "ping"})
			for _, c := range rep.Chunks {
				e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": c}})
			}
			e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			index++
		}
		for _, c := range calls {
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": anthropicToolUse(c, json.RawMessage("{}"))})
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(c.Input)}})
			e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
			index++
		}
		e.event("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": outTok}})
		e.event("message_stop", map[string]any{"type": "message_stop"})

	case Responses:
		respID, itemID := "resp_"+id, "msg_"+id
		var output []any
		if withText {
			output = append(output, responsesItem(itemID, "completed", []any{responsesText(text)}))
		}
		for i, c := range calls {
			output = append(output, responsesCall(fmt.Sprintf("fc_%s_%d", id, i), "completed", c, string(c.Input)))
		}
		if !r.Stream {
			writeJSON(w, http.StatusOK, responsesObject(respID, model, "completed", s.Created, output, inTok, outTok))
			return
		}
		e := newSSE(w)
		seq := 0
		ev := func(typ string, fields map[string]any) {
			fields["type"] = typ
			fields["sequence_number"] = seq
			seq++
			e.event(typ, fields)
		}
		ev("response.created", map[string]any{"response": responsesObject(respID, model, "in_progress", s.Created, []any{}, 0, 0)})
		ev("response.in_progress", map[string]any{"response": responsesObject(respID, model, "in_progress", s.Created, []any{}, 0, 0)})
		out := 0
		if withText {
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": responsesItem(itemID, "in_progress", []any{})})
			ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": responsesText("")})
			for _, c := range rep.Chunks {
				ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": c, "logprobs": []any{}})
			}
			ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": responsesText(text)})
			ev("response.output_item.done", map[string]any{"output_index": 0, "item": output[0]})
			out++
		}
		for i, c := range calls {
			fcID := fmt.Sprintf("fc_%s_%d", id, i)
			ev("response.output_item.added", map[string]any{"output_index": out, "item": responsesCall(fcID, "in_progress", c, "")})
			ev("response.function_call_arguments.delta", map[string]any{"item_id": fcID, "output_index": out, "delta": string(c.Input)})
			ev("response.function_call_arguments.done", map[string]any{"item_id": fcID, "output_index": out, "arguments": string(c.Input)})
			ev("response.output_item.done", map[string]any{"output_index": out, "item": output[out]})
			out++
		}
		ev("response.completed", map[string]any{"response": responsesObject(respID, model, "completed", s.Created, output, inTok, outTok)})

	case Chat:
		chatID := "chatcmpl-" + id
		created := s.Created.Unix()
		usage := map[string]any{"prompt_tokens": inTok, "completion_tokens": outTok, "total_tokens": inTok + outTok}
		finish := "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
		if !r.Stream {
			msg := map[string]any{"role": "assistant", "content": text}
			if len(calls) > 0 {
				var tc []any
				for _, c := range calls {
					tc = append(tc, chatToolCall(c, string(c.Input)))
				}
				msg["tool_calls"] = tc
				if !withText {
					msg["content"] = nil
				}
			}
			writeJSON(w, http.StatusOK, map[string]any{
				"id": chatID, "object": "chat.completion", "created": created, "model": model,
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
				"usage":   usage,
			})
			return
		}
		e := newSSE(w)
		chunk := func(delta map[string]any, finish any) map[string]any {
			return map[string]any{"id": chatID, "object": "chat.completion.chunk", "created": created, "model": model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		}
		e.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		if withText {
			for _, c := range rep.Chunks {
				e.event("", chunk(map[string]any{"content": c}, nil))
			}
		}
		for i, c := range calls {
			// The call's name and id first, then its arguments, as the APIs stream them.
			first := chatToolCall(c, "")
			first["index"] = i
			e.event("", chunk(map[string]any{"tool_calls": []any{first}}, nil))
			e.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": string(c.Input)}}}}, nil))
		}
		e.event("", chunk(map[string]any{}, finish))
		if includeUsage(r.Body) {
			e.event("", map[string]any{"id": chatID, "object": "chat.completion.chunk", "created": created, "model": model, "choices": []any{}, "usage": usage})
		}
		e.event("", "[DONE]")
	}
}

// calls returns the reply's tool calls with their ids filled in and their input a JSON object.
func (rep Reply) calls(seq int) []ToolCall {
	out := make([]ToolCall, 0, len(rep.Calls))
	for i, c := range rep.Calls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d_%d", seq, i)
		}
		switch {
		case len(bytes.TrimSpace(c.Input)) == 0:
			c.Input = json.RawMessage("{}")
		case !json.Valid(c.Input):
			// Sent as a JSON string, as a model that botched its arguments would: the stream
			// stays well formed and the CLI sees arguments that are not an object.
			c.Input, _ = json.Marshal(string(c.Input))
		}
		out = append(out, c)
	}
	return out
}

func anthropicToolUse(c ToolCall, input json.RawMessage) map[string]any {
	return map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input}
}

func responsesCall(id, status string, c ToolCall, args string) map[string]any {
	return map[string]any{"type": "function_call", "id": id, "call_id": c.ID, "name": c.Name, "arguments": args, "status": status}
}

func chatToolCall(c ToolCall, args string) map[string]any {
	return map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}}
}

func anthropicText(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func anthropicMessage(id, model string, content []any, stop any, in, out int) map[string]any {
	return map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}
}

func responsesText(s string) map[string]any {
	return map[string]any{"type": "output_text", "text": s, "annotations": []any{}, "logprobs": []any{}}
}

func responsesItem(id, status string, content []any) map[string]any {
	return map[string]any{"id": id, "type": "message", "status": status, "role": "assistant", "content": content}
}

func responsesObject(id, model, status string, created time.Time, output []any, in, out int) map[string]any {
	obj := map[string]any{
		"id": id, "object": "response", "created_at": created.Unix(), "status": status,
		"model": model, "output": output, "error": nil, "incomplete_details": nil,
	}
	if status == "completed" {
		obj["usage"] = map[string]any{
			"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": in + out,
		}
	}
	return obj
}

// includeUsage reports whether a Chat Completions request asked for a final usage chunk.
func includeUsage(body []byte) bool {
	var b struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	return json.Unmarshal(body, &b) == nil && b.StreamOptions.IncludeUsage
}
