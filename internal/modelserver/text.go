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
