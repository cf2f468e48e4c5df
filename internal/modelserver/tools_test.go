package modelserver

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// gotCall is a tool call as a client of the API reads it.
type gotCall struct {
	ID, Name, Args string
}

// readCalls reads the text, the tool calls and the stop reason of a reply as a client of each
// API would, streamed or whole, and checks that the stream's pieces agree with its summary.
func readCalls(t *testing.T, k Kind, stream bool, body []byte) (text string, calls []gotCall, stop string) {
	t.Helper()
	if !stream {
		m := field(t, string(body))
		switch k {
		case Anthropic:
			for _, c := range m["content"].([]any) {
				c := c.(map[string]any)
				switch c["type"] {
				case "text":
					text += c["text"].(string)
				case "tool_use":
					args, _ := json.Marshal(c["input"])
					calls = append(calls, gotCall{c["id"].(string), c["name"].(string), string(args)})
				}
			}
			stop, _ = m["stop_reason"].(string)
		case Responses:
			for _, it := range m["output"].([]any) {
				it := it.(map[string]any)
				switch it["type"] {
				case "message":
					text += path(it, "content", 0, "text").(string)
				case "function_call":
					calls = append(calls, gotCall{it["call_id"].(string), it["name"].(string), it["arguments"].(string)})
				}
			}
			stop, _ = m["status"].(string)
		case Chat:
			msg := path(m, "choices", 0, "message").(map[string]any)
			text, _ = msg["content"].(string)
			tcs, _ := msg["tool_calls"].([]any)
			for _, tc := range tcs {
				calls = append(calls, gotCall{path(tc, "id").(string), path(tc, "function", "name").(string), path(tc, "function", "arguments").(string)})
			}
			stop, _ = path(m, "choices", 0, "finish_reason").(string)
		}
		return text, calls, stop
	}
	evs := parseSSE(t, body)
	switch k {
	case Anthropic:
		byIndex := map[float64]int{}
		for _, e := range evs {
			m := field(t, e.data)
			switch e.name {
			case "content_block_start":
				if path(m, "content_block", "type") == "tool_use" {
					if in := path(m, "content_block", "input"); !reflect.DeepEqual(in, map[string]any{}) {
						t.Errorf("tool_use starts with input %v, want {} (the input comes in deltas)", in)
					}
					byIndex[m["index"].(float64)] = len(calls)
					calls = append(calls, gotCall{ID: path(m, "content_block", "id").(string), Name: path(m, "content_block", "name").(string)})
				}
			case "content_block_delta":
				switch path(m, "delta", "type") {
				case "text_delta":
					text += path(m, "delta", "text").(string)
				case "input_json_delta":
					i, ok := byIndex[m["index"].(float64)]
					if !ok {
						t.Fatalf("input_json_delta for block %v, which is no tool_use", m["index"])
					}
					calls[i].Args += path(m, "delta", "partial_json").(string)
				}
			case "message_delta":
				stop, _ = path(m, "delta", "stop_reason").(string)
			}
		}
	case Responses:
		byIndex := map[float64]int{}
		var final map[string]any
		for i, e := range evs {
			m := field(t, e.data)
			if m["sequence_number"] != float64(i) {
				t.Errorf("event %d %s has sequence_number %v", i, e.name, m["sequence_number"])
			}
			switch e.name {
			case "response.output_item.added":
				if path(m, "item", "type") == "function_call" {
					byIndex[m["output_index"].(float64)] = len(calls)
					calls = append(calls, gotCall{ID: path(m, "item", "call_id").(string), Name: path(m, "item", "name").(string)})
				}
			case "response.output_text.delta":
				text += m["delta"].(string)
			case "response.function_call_arguments.delta":
				calls[byIndex[m["output_index"].(float64)]].Args += m["delta"].(string)
			case "response.function_call_arguments.done":
				if c := calls[byIndex[m["output_index"].(float64)]]; c.Args != m["arguments"] {
					t.Errorf("arguments.done says %q, the deltas %q", m["arguments"], c.Args)
				}
			case "response.completed":
				final = m
			}
		}
		// The completed response repeats the whole output: it must agree with the stream.
		wText, wCalls, wStop := readCalls(t, Responses, false, mustJSON(t, final["response"]))
		if wText != text || !reflect.DeepEqual(wCalls, calls) {
			t.Errorf("response.completed carries %q %v, the stream %q %v", wText, wCalls, text, calls)
		}
		stop = wStop
	case Chat:
		byIndex := map[float64]int{}
		for _, e := range evs[:len(evs)-1] {
			m := field(t, e.data)
			if c, ok := path(m, "choices", 0, "delta", "content").(string); ok {
				text += c
			}
			tcs, _ := path(m, "choices", 0, "delta", "tool_calls").([]any)
			for _, tc := range tcs {
				idx := path(tc, "index").(float64)
				i, ok := byIndex[idx]
				if !ok {
					byIndex[idx] = len(calls)
					i = len(calls)
					calls = append(calls, gotCall{ID: path(tc, "id").(string), Name: path(tc, "function", "name").(string)})
				}
				if a, ok := path(tc, "function", "arguments").(string); ok {
					calls[i].Args += a
				}
			}
			if f, ok := path(m, "choices", 0, "finish_reason").(string); ok {
				stop = f
			}
		}
	}
	return text, calls, stop
}

// canonical is the JSON text s with its object keys sorted: the whole Anthropic reply carries
// the input as an object, which a client may re-encode in any order.
func canonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("arguments %q are not JSON: %v", s, err)
	}
	return string(mustJSON(t, v))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestToolCalls(t *testing.T) {
	withText := Reply{
		Chunks: []string{"Let me ", "look."},
		Calls: []ToolCall{
			{Name: "read", Input: json.RawMessage(`{"filePath":"/src/app/README.md"}`)},
			{ID: "mine", Name: "write", Input: json.RawMessage(`{"filePath":"/src/app/x","content":"é \"q\"\n"}`)},
		},
	}
	callsOnly := Call("exec_command", map[string]string{"cmd": "cat /etc/hostname"})
	apis := []struct {
		kind Kind
		path string
		stop string // the stop reason of a reply with calls
	}{
		{Anthropic, "/v1/messages", "tool_use"},
		{Responses, "/v1/responses", "completed"},
		{Chat, "/v1/chat/completions", "tool_calls"},
	}
	for _, api := range apis {
		for _, stream := range []bool{true, false} {
			for name, rep := range map[string]Reply{"text": withText, "only": callsOnly} {
				tname := string(api.kind) + "-tools-" + name
				if stream {
					tname += "-stream"
				}
				t.Run(tname, func(t *testing.T) {
					s := start(t)
					s.Enqueue(rep)
					body := `{"model":"m","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"messages":[{"role":"user","content":"go"}],"input":"go"}`
					status, _, got := do(t, s, http.MethodPost, api.path, body)
					if status != http.StatusOK {
						t.Fatalf("status %d: %s", status, got)
					}
					golden(t, tname, got)
					text, calls, stop := readCalls(t, api.kind, stream, got)
					if text != rep.String() {
						t.Errorf("text %q, want %q", text, rep.String())
					}
					var want []gotCall
					for i, c := range rep.Calls {
						id := c.ID
						if id == "" {
							id = "call_1_" + string(rune('0'+i))
						}
						want = append(want, gotCall{id, c.Name, canonical(t, string(c.Input))})
					}
					for i := range calls {
						calls[i].Args = canonical(t, calls[i].Args)
					}
					if !reflect.DeepEqual(calls, want) {
						t.Errorf("calls %+v, want %+v", calls, want)
					}
					if stop != api.stop {
						t.Errorf("stop reason %q, want %q", stop, api.stop)
					}
				})
			}
		}
	}
}

// A call's input that is not JSON goes out as a JSON string, and one without input as {}:
// the stream stays well formed either way.
func TestToolCallInput(t *testing.T) {
	s := start(t)
	s.Enqueue(Reply{Calls: []ToolCall{{Name: "a", Input: json.RawMessage(`{"open`)}, {Name: "b"}}})
	_, _, got := do(t, s, http.MethodPost, "/v1/messages", `{"model":"m"}`)
	_, calls, _ := readCalls(t, Anthropic, false, got)
	want := []gotCall{{"call_1_0", "a", `"{\"open"`}, {"call_1_1", "b", `{}`}}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("calls %+v, want %+v", calls, want)
	}
}

func TestToolResults(t *testing.T) {
	tests := []struct {
		name    string
		kind    Kind
		body    string
		want    []ToolResult
		wantErr string
	}{
		{"anthropic", Anthropic, `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"Read","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"1\tline"},{"type":"text","text":"<reminder>"}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c2","is_error":true,"content":[{"type":"text","text":"no"},{"type":"text","text":"way"}]}]}]}`,
			[]ToolResult{{CallID: "c1", Output: "1\tline"}, {CallID: "c2", Output: "no\nway", IsError: true}}, ""},
		{"anthropic none", Anthropic, `{"messages":[{"role":"user","content":"go"}]}`, nil, ""},
		{"anthropic bad result", Anthropic, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"c9","content":7}]}]}`, nil, "tool result c9: decode message content"},
		{"chat", Chat, `{"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"c1"}]},{"role":"tool","tool_call_id":"c1","content":"out"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"parts"}]}]}`,
			[]ToolResult{{CallID: "c1", Output: "out"}, {CallID: "c2", Output: "parts"}}, ""},
		{"responses", Responses, `{"input":[{"role":"user","content":"go"},{"type":"function_call","call_id":"c1"},{"type":"function_call_output","call_id":"c1","output":"Output:\nx"},{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"patched"}]}]}`,
			[]ToolResult{{CallID: "c1", Output: "Output:\nx"}, {CallID: "c2", Output: "patched"}}, ""},
		{"responses string input", Responses, `{"input":"go"}`, nil, ""},
		{"not JSON", Chat, `{`, nil, "decode messages"},
		{"not a model request", Aux, `{}`, nil, "is not a model request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Seq: 2, Method: "POST", Path: "/x", Kind: tt.kind, Body: []byte(tt.body)}
			got, err := r.ToolResults()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ToolResults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestTools(t *testing.T) {
	tests := []struct {
		name    string
		kind    Kind
		body    string
		want    []string
		wantErr string
	}{
		{"anthropic", Anthropic, `{"tools":[{"name":"Read","input_schema":{}},{"name":"Write"}]}`, []string{"Read", "Write"}, ""},
		{"chat", Chat, `{"tools":[{"type":"function","function":{"name":"read"}},{"type":"function","function":{"name":"bash"}}]}`, []string{"read", "bash"}, ""},
		{"responses", Responses, `{"tools":[{"type":"function","name":"exec_command"},{"type":"custom","name":"apply_patch"},{"type":"web_search"}]}`, []string{"exec_command", "apply_patch", "web_search"}, ""},
		{"none", Chat, `{}`, nil, ""},
		{"bad", Chat, `{"tools":{}}`, nil, "decode tools"},
		{"not a model request", Aux, `{}`, nil, "is not a model request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Seq: 2, Method: "POST", Path: "/x", Kind: tt.kind, Body: []byte(tt.body)}
			got, err := r.Tools()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Tools() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
