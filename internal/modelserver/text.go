package modelserver

import (
	"encoding/json"
	"fmt"
	"strings"
)

// UserTexts returns the text of every user message in a model request, in order: what the CLI
// sent as the user's turn (the prompt, and whatever the CLI itself adds there), as opposed to
// the system prompt and tool definitions. Each text part of a message is one entry.
func (r Request) UserTexts() ([]string, error) {
	if !r.IsModel() {
		return nil, fmt.Errorf("modelserver: request %d (%s %s) is not a model request", r.Seq, r.Method, r.Path)
	}
	var out []string
	switch r.Kind {
	case Anthropic, Chat:
		var b struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return nil, fmt.Errorf("modelserver: request %d: decode messages: %w", r.Seq, err)
		}
		for _, m := range b.Messages {
			if m.Role != "user" {
				continue
			}
			texts, err := contentTexts(m.Content)
			if err != nil {
				return nil, fmt.Errorf("modelserver: request %d: %w", r.Seq, err)
			}
			out = append(out, texts...)
		}
	case Responses:
		var b struct {
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return nil, fmt.Errorf("modelserver: request %d: decode input: %w", r.Seq, err)
		}
		var s string
		if json.Unmarshal(b.Input, &s) == nil {
			return []string{s}, nil
		}
		var items []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(b.Input, &items); err != nil {
			return nil, fmt.Errorf("modelserver: request %d: decode input items: %w", r.Seq, err)
		}
		for _, it := range items {
			if (it.Type != "" && it.Type != "message") || it.Role != "user" {
				continue
			}
			texts, err := contentTexts(it.Content)
			if err != nil {
				return nil, fmt.Errorf("modelserver: request %d: %w", r.Seq, err)
			}
			out = append(out, texts...)
		}
	}
	return out, nil
}

// contentTexts reads a message's content: a string, or a list of parts of which the text ones
// ("text", "input_text") count.
func contentTexts(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("decode message content: %w", err)
	}
	var out []string
	for _, p := range parts {
		if (p.Type == "text" || p.Type == "input_text") && p.Text != nil {
			out = append(out, *p.Text)
		}
	}
	return out, nil
}

// UserText is UserTexts joined with newlines ("" when the request cannot be decoded).
func (r Request) UserText() string {
	texts, err := r.UserTexts()
	if err != nil {
		return ""
	}
	return strings.Join(texts, "\n")
}

// ToolResult is what a CLI sent back for one tool call: the tool's output, or its refusal.
type ToolResult struct {
	CallID string // the ToolCall.ID it answers
	// Output is the result's text (text parts joined with newlines).
	Output string
	// IsError: the CLI marked the result as an error (Anthropic's is_error). The other APIs have
	// no such flag: their errors are only text.
	IsError bool
}

// ToolResults returns the tool results a model request carries, in order: Anthropic
// "tool_result" parts of user messages, Chat Completions "tool" messages, Responses
// "function_call_output" and "custom_tool_call_output" items.
func (r Request) ToolResults() ([]ToolResult, error) {
	if !r.IsModel() {
		return nil, fmt.Errorf("modelserver: request %d (%s %s) is not a model request", r.Seq, r.Method, r.Path)
	}
	var out []ToolResult
	switch r.Kind {
	case Anthropic:
		var b struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return nil, fmt.Errorf("modelserver: request %d: decode messages: %w", r.Seq, err)
		}
		for _, m := range b.Messages {
			var parts []struct {
				Type      string          `json:"type"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
				IsError   bool            `json:"is_error"`
			}
			if m.Role != "user" || json.Unmarshal(m.Content, &parts) != nil {
				continue // a string content holds no tool result
			}
			for _, p := range parts {
				if p.Type != "tool_result" {
					continue
				}
				texts, err := contentTexts(p.Content)
				if err != nil {
					return nil, fmt.Errorf("modelserver: request %d: tool result %s: %w", r.Seq, p.ToolUseID, err)
				}
				out = append(out, ToolResult{CallID: p.ToolUseID, Output: strings.Join(texts, "\n"), IsError: p.IsError})
			}
		}
	case Chat:
		var b struct {
			Messages []struct {
				Role       string          `json:"role"`
				ToolCallID string          `json:"tool_call_id"`
				Content    json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return nil, fmt.Errorf("modelserver: request %d: decode messages: %w", r.Seq, err)
		}
		for _, m := range b.Messages {
			if m.Role != "tool" {
				continue
			}
			texts, err := contentTexts(m.Content)
			if err != nil {
				return nil, fmt.Errorf("modelserver: request %d: tool result %s: %w", r.Seq, m.ToolCallID, err)
			}
			out = append(out, ToolResult{CallID: m.ToolCallID, Output: strings.Join(texts, "\n")})
		}
	case Responses:
		var b struct {
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return nil, fmt.Errorf("modelserver: request %d: decode input: %w", r.Seq, err)
		}
		var items []struct {
			Type   string          `json:"type"`
			CallID string          `json:"call_id"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(b.Input, &items) != nil {
			return nil, nil // a string input holds no tool result
		}
		for _, it := range items {
			if it.Type != "function_call_output" && it.Type != "custom_tool_call_output" {
				continue
			}
			texts, err := contentTexts(it.Output)
			if err != nil {
				return nil, fmt.Errorf("modelserver: request %d: tool result %s: %w", r.Seq, it.CallID, err)
			}
			out = append(out, ToolResult{CallID: it.CallID, Output: strings.Join(texts, "\n")})
		}
	}
	return out, nil
}

// Tools returns the names of the tools a model request offers the model: Anthropic's and the
// Responses API's tools[].name (for a built-in tool without a name, its type), Chat
// Completions' tools[].function.name.
func (r Request) Tools() ([]string, error) {
	if !r.IsModel() {
		return nil, fmt.Errorf("modelserver: request %d (%s %s) is not a model request", r.Seq, r.Method, r.Path)
	}
	var b struct {
		Tools []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		return nil, fmt.Errorf("modelserver: request %d: decode tools: %w", r.Seq, err)
	}
	var out []string
	for _, t := range b.Tools {
		switch {
		case t.Name != "":
			out = append(out, t.Name)
		case t.Function.Name != "":
			out = append(out, t.Function.Name)
		case t.Type != "":
			out = append(out, t.Type)
		}
	}
	return out, nil
}
