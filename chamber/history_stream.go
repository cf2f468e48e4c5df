package chamber

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"
)

// Streaming the history index: a plan of years has tens of thousands of rows, and neither
// `history --json` nor a window of the last rows may hold them all in memory. EachHistory
// decodes one row at a time, oldest first; with a window (HistoryOptions.Last) it reads the
// yearly files from their end and decodes only the rows it shows.

// historyChunk is how much of a yearly file is read at a time from its end.
const historyChunk = 64 << 10

// EachHistory calls fn for each finished session of the index in the asked range, oldest first,
// holding one row at a time. With opts.Last > 0 only the last opts.Last rows of the range are
// given, and more says whether earlier ones were left out. An error of fn stops it and is
// returned as it is.
func EachHistory(ctx context.Context, env *Env, opts HistoryOptions, fn func(HistoryRow) error) (more bool, err error) {
	r, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true})
	if err != nil {
		return false, err
	}
	defer r.close()
	files := historyFiles(r.store, opts)
	if opts.Last > 0 {
		rows, more, err := lastHistory(files, opts)
		if err != nil {
			return false, &Error{Msg: "cannot read the history", Err: err}
		}
		for _, row := range rows {
			if err := fn(row); err != nil {
				return false, err
			}
		}
		return more, nil
	}
	for _, f := range files {
		if err := eachHistoryLine(f, opts, fn); err != nil {
			if fe, ok := err.(fnError); ok {
				return false, fe.err
			}
			return false, &Error{Msg: "cannot read the history", Err: err}
		}
	}
	return false, nil
}

// fnError carries an error of EachHistory's fn through the reading loop unchanged.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// historyFiles are the yearly index files that may hold rows of the range, oldest first.
func historyFiles(s store, opts HistoryOptions) []string {
	files, _ := filepath.Glob(s.path(historyGlob))
	sort.Strings(files)
	var keep []string
	for _, f := range files {
		var year int
		if _, err := fmt.Sscanf(filepath.Base(f), historyYear, &year); err != nil {
			continue
		}
		if !opts.Since.IsZero() && year < opts.Since.UTC().Year() || !opts.Until.IsZero() && year > opts.Until.UTC().Year() {
			continue
		}
		keep = append(keep, f)
	}
	return keep
}

// historyRow decodes one index line; ok is false for a line that does not parse (a crash cut
// it: skipped, as readHistory does) or a row outside the range.
func historyRow(line []byte, opts HistoryOptions) (HistoryRow, bool) {
	var row HistoryRow
	if outsideRange(line, opts) {
		return row, false
	}
	if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &row) != nil {
		return row, false
	}
	if !opts.Since.IsZero() && row.Started.Before(opts.Since) || !opts.Until.IsZero() && row.Started.After(opts.Until) {
		return row, false
	}
	return row, true
}

// startedKey is how json.Marshal writes a row's start: the first `"started":"` of a line is it
// (inside a string value a quote is escaped, and the key comes before every free-text field).
var startedKey = []byte(`"started":"`)

// outsideRange tells from a line's start time alone, without decoding the row, that it is
// outside the range: the dashboard's spend chart asks for the last 32 days, and decoding every
// row of the year before them grew with the year (issue 28: a fifth of the chamber page of an
// hourly plan). A line whose start cannot be read so is decoded, and judged, as before.
func outsideRange(line []byte, opts HistoryOptions) bool {
	if opts.Since.IsZero() && opts.Until.IsZero() {
		return false
	}
	i := bytes.Index(line, startedKey)
	if i < 0 {
		return false
	}
	v := line[i+len(startedKey):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, string(v[:j]))
	if err != nil {
		return false
	}
	return !opts.Since.IsZero() && t.Before(opts.Since) || !opts.Until.IsZero() && t.After(opts.Until)
}

// eachHistoryLine calls fn for every row of one yearly file in the range, in file order.
func eachHistoryLine(path string, opts HistoryOptions, fn func(HistoryRow) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scanLines(f, func(line []byte) error {
		row, ok := historyRow(line, opts)
		if !ok {
			return nil
		}
		if err := fn(row); err != nil {
			return fnError{err}
		}
		return nil
	})
}

// scanLines calls fn for each line of r (without its newline); a last line without a newline
// counts. Lines longer than a chunk are joined across reads.
func scanLines(r io.Reader, fn func([]byte) error) error {
	buf := make([]byte, historyChunk)
	var part []byte
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				part = append(part, data...)
				break
			}
			line := data[:i]
			if len(part) > 0 {
				part = append(part, line...)
				line = part
			}
			if ferr := fn(line); ferr != nil {
				return ferr
			}
			part = part[:0]
			data = data[i+1:]
		}
		if err == io.EOF {
			if len(part) > 0 {
				return fn(part)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lastHistory returns the last opts.Last rows of the range, oldest first, reading the files
// newest first from their end; more says whether an earlier row of the range exists.
func lastHistory(files []string, opts HistoryOptions) ([]HistoryRow, bool, error) {
	var rows []HistoryRow // newest first
	for i := len(files) - 1; i >= 0; i-- {
		done, err := eachLineBackward(files[i], func(line []byte) bool {
			row, ok := historyRow(line, opts)
			if !ok {
				return true
			}
			rows = append(rows, row)
			return len(rows) <= opts.Last // one beyond the window: there is more
		})
		if err != nil {
			return nil, false, err
		}
		if done {
			break
		}
	}
	more := len(rows) > opts.Last
	if more {
		rows = rows[:opts.Last]
	}
	slices.Reverse(rows)
	return rows, more, nil
}

// eachLineBackward calls fn for each line of path from the last to the first, reading chunks
// from the end, until fn returns false (then stopped is true).
func eachLineBackward(path string, fn func([]byte) bool) (stopped bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	end := fi.Size()
	var tail []byte // the start of the line that the chunk after this one began, not yet whole
	for end > 0 {
		start := max(end-historyChunk, 0)
		chunk := make([]byte, end-start, end-start+int64(len(tail)))
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return false, err
		}
		chunk = append(chunk, tail...)
		end = start
		for {
			i := bytes.LastIndexByte(chunk, '\n')
			if i < 0 {
				break
			}
			if line := chunk[i+1:]; len(line) > 0 && !fn(line) {
				return true, nil
			}
			chunk = chunk[:i]
		}
		tail = chunk
	}
	if len(tail) > 0 && !fn(tail) {
		return true, nil
	}
	return false, nil
}

// WriteHistoryJSON writes the rows EachHistory gives as one JSON array, a row at a time, in the
// form WriteHistory's JSON has (an array indented by two spaces).
func WriteHistoryJSON(ctx context.Context, env *Env, opts HistoryOptions, w io.Writer) error {
	return writeRowsJSON(w, func(fn func(HistoryRow) error) error {
		_, err := EachHistory(ctx, env, opts, fn)
		return err
	})
}

// writeRowsJSON writes the rows each gives as WriteHistory's JSON does, one at a time.
func writeRowsJSON(w io.Writer, each func(func(HistoryRow) error) error) error {
	n := 0
	err := each(func(row HistoryRow) error {
		b, err := json.MarshalIndent(row, "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if n == 0 {
			sep = "[\n  "
		}
		n++
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	end := "\n]\n"
	if n == 0 {
		end = "[]\n"
	}
	_, err = io.WriteString(w, end)
	return err
}
