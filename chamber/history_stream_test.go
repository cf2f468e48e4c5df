package chamber

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeIndex writes yearly index files into dir: rows sessions from 1, one an hour from
// 2025-12-31 20:00 UTC (so they span two years), a crash-cut line in the middle of the first
// file and a long summary every tenth row (longer than a read chunk). It returns the paths,
// oldest first.
func writeIndex(t *testing.T, dir string, rows int) []string {
	t.Helper()
	start := time.Date(2025, 12, 31, 20, 0, 0, 0, time.UTC)
	files := map[int]*bytes.Buffer{}
	for i := 1; i <= rows; i++ {
		at := start.Add(time.Duration(i) * time.Hour)
		r := HistoryRow{Session: i, Started: at, Ended: at, Summary: fmt.Sprintf("row %d", i)}
		if i%10 == 0 {
			r.Summary += strings.Repeat("x", historyChunk+100)
		}
		line, _ := json.Marshal(r)
		b := files[at.Year()]
		if b == nil {
			b = &bytes.Buffer{}
			files[at.Year()] = b
		}
		b.Write(append(line, '\n'))
		if i == 2 {
			b.WriteString(`{"session": 99, "summ` + "\n") // cut by a crash: skipped
		}
	}
	var paths []string
	for _, y := range []int{2025, 2026} {
		if files[y] == nil {
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("history-%d.jsonl", y))
		if err := os.WriteFile(p, files[y].Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func sessions(rows []HistoryRow) []int {
	var n []int
	for _, r := range rows {
		n = append(n, r.Session)
	}
	return n
}

func TestHistoryStreamAll(t *testing.T) {
	files := writeIndex(t, t.TempDir(), 40)
	var got []HistoryRow
	for _, f := range files {
		if err := eachHistoryLine(f, HistoryOptions{}, func(r HistoryRow) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 40 || got[0].Session != 1 || got[39].Session != 40 || got[9].Summary != "row 10"+strings.Repeat("x", historyChunk+100) {
		t.Fatalf("rows %v", sessions(got))
	}
	for i, r := range got {
		if r.Session != i+1 {
			t.Fatalf("row %d is session %d: %v", i, r.Session, sessions(got))
		}
	}
}

func TestHistoryLastWindow(t *testing.T) {
	files := writeIndex(t, t.TempDir(), 40) // sessions 1-3 in 2025, 4-40 in 2026
	for _, tc := range []struct {
		last  int
		since time.Time
		want  []int
		more  bool
	}{
		{last: 3, want: []int{38, 39, 40}, more: true},
		{last: 39, want: seq(2, 40), more: true},  // across the two files
		{last: 40, want: seq(1, 40), more: false}, // exactly all: nothing left out
		{last: 50, want: seq(1, 40), more: false}, // more than there are
		{last: 5, since: time.Date(2026, 1, 2, 6, 0, 0, 0, time.UTC), want: seq(36, 40), more: true},
		{last: 5, since: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC), want: []int{38, 39, 40}, more: false},
	} {
		rows, more, err := lastHistory(files, HistoryOptions{Last: tc.last, Since: tc.since})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(sessions(rows)) != fmt.Sprint(tc.want) || more != tc.more {
			t.Errorf("last %d since %v: %v more=%v, want %v more=%v", tc.last, tc.since, sessions(rows), more, tc.want, tc.more)
		}
	}
}

func seq(a, b int) []int {
	var s []int
	for i := a; i <= b; i++ {
		s = append(s, i)
	}
	return s
}

// The streamed JSON is byte for byte what WriteHistory writes for the same rows.
func TestHistoryJSONStreamSameAsSlice(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		var rows []HistoryRow
		for i := 1; i <= n; i++ {
			rows = append(rows, HistoryRow{Session: i, Summary: "a <b> & \"c\"\n", Started: time.Unix(int64(i), 0).UTC()})
		}
		var want, got bytes.Buffer
		if err := WriteHistory(&want, append([]HistoryRow{}, rows...), true, time.UTC); err != nil {
			t.Fatal(err)
		}
		err := writeRowsJSON(&got, func(fn func(HistoryRow) error) error {
			for _, r := range rows {
				if err := fn(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d rows: streamed\n%s\nwant\n%s", n, got.String(), want.String())
		}
	}
}
