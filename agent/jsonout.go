package agent

import (
	"bytes"
	"errors"
	"io"
	"strings"
)

// UsageWriter stands between a preset's JSON output (UsageFormats) and the session log: it
// writes the agent's text, and only that, to text (the log's stdout, where markers are read
// with the same rules as ever: lines, bounds, stdout only), the other events of the stream to
// other (the log's stderr: recorded, never read for markers), and keeps the run's usage.
//
// Output that is not the JSON form (an operator's args switched it back to text, or the CLI
// printed a plain error) goes to text as it is, so nothing the CLI printed is lost; the usage
// is then unknown.
type UsageWriter struct {
	preset      string
	text, other io.Writer

	mode    int    // 0 undecided, 1 claude's one object (buffered), 2 JSON lines, 3 plain text
	pending []byte // an incomplete line (JSON lines), or claude's whole object
	dropped bool   // claude's object went past MaxUsageOutput
	cutting bool   // JSON lines: a line went past maxEventLine; its rest is dropped

	usage RunUsage
	found bool
}

const (
	modeUndecided = iota
	modeObject
	modeLines
	modePlain
)

// maxEventLine bounds one JSON event line; a longer one is cut and recorded as other output.
const maxEventLine = 16 << 20

// maxOtherLine bounds what one event that is not the agent's text leaves in the log.
const maxOtherLine = 2 << 10

// NewUsageWriter reads preset's JSON output.
func NewUsageWriter(preset string, text, other io.Writer) *UsageWriter {
	return &UsageWriter{preset: preset, text: text, other: other}
}

// Write takes the next bytes of the CLI's standard output.
func (w *UsageWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.mode == modeUndecided {
		trimmed := bytes.TrimLeft(p, " \t\r\n")
		if len(trimmed) == 0 {
			return n, nil
		}
		switch {
		case trimmed[0] != '{':
			w.mode = modePlain
		case w.preset == "claude":
			w.mode = modeObject
		default:
			w.mode = modeLines
		}
		p = trimmed
	}
	switch w.mode {
	case modePlain:
		_, err := w.text.Write(p)
		return n, err
	case modeObject:
		if len(w.pending)+len(p) > MaxUsageOutput {
			w.dropped = true
			return n, nil
		}
		w.pending = append(w.pending, p...)
		return n, nil
	}
	if w.cutting {
		// The rest of a line cut at maxEventLine is dropped up to its end: it is the middle
		// of an event (a command's output, say), never the agent's text.
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			return n, nil
		}
		p, w.cutting = p[i+1:], false
	}
	w.pending = append(w.pending, p...)
	for {
		i := bytes.IndexByte(w.pending, '\n')
		if i < 0 {
			break
		}
		if err := w.line(w.pending[:i]); err != nil {
			return n, err
		}
		w.pending = w.pending[i+1:]
	}
	if len(w.pending) > maxEventLine {
		err := w.otherLine(w.pending)
		w.pending, w.cutting = nil, true
		if err == nil && w.other != nil {
			_, err = io.WriteString(w.other, "cryochamber: an event line longer than 16 MiB was cut; the rest of it was not read\n")
		}
		if err != nil {
			return n, err
		}
	}
	if len(w.pending) == 0 {
		w.pending = nil // let a big buffer go
	}
	return n, nil
}

// line handles one line of a JSON-lines stream.
func (w *UsageWriter) line(l []byte) error {
	l = bytes.TrimRight(l, "\r")
	if len(bytes.TrimSpace(l)) == 0 {
		return nil
	}
	if l[0] != '{' {
		_, err := w.text.Write(append(append([]byte(nil), l...), '\n'))
		return err
	}
	var text strings.Builder
	event := codexEvent
	if w.preset == "opencode" {
		event = opencodeEvent
	}
	if event(l, &text, &w.usage) {
		w.found = true
		return nil
	}
	if text.Len() > 0 {
		s := text.String()
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		_, err := io.WriteString(w.text, s)
		return err
	}
	return w.otherLine(l)
}

// otherLine records an event that is not the agent's text, cut to maxOtherLine.
func (w *UsageWriter) otherLine(l []byte) error {
	if w.other == nil {
		return nil
	}
	if len(l) > maxOtherLine {
		l = append(append([]byte(nil), l[:maxOtherLine]...), "…"...)
	}
	_, err := w.other.Write(append(append([]byte(nil), l...), '\n'))
	return err
}

// Close handles what is left: the last line without a newline, or claude's whole object.
func (w *UsageWriter) Close() error {
	switch w.mode {
	case modeLines:
		if len(w.pending) > 0 {
			err := w.line(w.pending)
			w.pending = nil
			return err
		}
	case modeObject:
		data := w.pending
		w.pending = nil
		if w.dropped {
			return w.otherLine([]byte("cryochamber: the agent's JSON output was larger than 64 MiB and was not read"))
		}
		text, u, err := readClaude(data)
		if errors.Is(err, ErrNoUsage) {
			// Not the result object: show what it printed, as it printed it.
			_, werr := w.text.Write(data)
			return werr
		}
		w.usage, w.found = u, true
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		_, werr := io.WriteString(w.text, text)
		return werr
	}
	return nil
}

// Usage is the run's usage, and whether the output carried a usage record at all.
func (w *UsageWriter) Usage() (RunUsage, bool) { return w.usage.settle(), w.found }
