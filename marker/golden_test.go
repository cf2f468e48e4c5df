package marker

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The golden files show a Result as JSON, with times in RFC 3339 and problems as their text.
type goldenTime struct {
	Raw string `json:"raw"`
	Abs string `json:"abs,omitempty"`
	Rel string `json:"rel,omitempty"`
}

func toGoldenTime(t Time) goldenTime {
	g := goldenTime{Raw: t.Raw}
	if t.Relative() {
		g.Rel = t.Rel.String()
	} else {
		g.Abs = t.Abs.Format(time.RFC3339Nano)
	}
	return g
}

type goldenResult struct {
	Exit      *goldenExit      `json:"exit"`
	Wake      *goldenTodo      `json:"wake"`
	Cmd       *goldenCmd       `json:"cmd"`
	Plans     []goldenText     `json:"plans"`
	Fallbacks []goldenFallback `json:"fallbacks"`
	Replies   []goldenText     `json:"replies"`
	Todos     []goldenTodo     `json:"todos"`
	Errors    []string         `json:"errors"`
	Warnings  []string         `json:"warnings"`
}

type goldenExit struct {
	Code    int    `json:"code"`
	Summary string `json:"summary"`
	Line    int    `json:"line"`
}

type goldenCmd struct {
	Raw  string   `json:"raw"`
	Args []string `json:"args"`
	Line int      `json:"line"`
}

type goldenText struct {
	Text string `json:"text"`
	Line int    `json:"line"`
}

type goldenFallback struct {
	Action  string `json:"action"`
	Target  string `json:"target"`
	Message string `json:"message"`
	Line    int    `json:"line"`
}

// goldenTodo shows a TODO, and a WAKE (without text).
type goldenTodo struct {
	Time goldenTime `json:"time"`
	Text string     `json:"text,omitempty"`
	Line int        `json:"line"`
}

func toGolden(r *Result) goldenResult {
	g := goldenResult{Plans: []goldenText{}, Fallbacks: []goldenFallback{}, Replies: []goldenText{},
		Todos: []goldenTodo{}, Errors: []string{}, Warnings: []string{}}
	if e := r.Exit; e != nil {
		g.Exit = &goldenExit{e.Code, e.Summary, e.Line}
	}
	if w := r.Wake; w != nil {
		g.Wake = &goldenTodo{Time: toGoldenTime(w.Time), Line: w.Line}
	}
	if c := r.Cmd; c != nil {
		g.Cmd = &goldenCmd{c.Raw, c.Args, c.Line}
	}
	for _, p := range r.Plans {
		g.Plans = append(g.Plans, goldenText(p))
	}
	for _, f := range r.Fallbacks {
		g.Fallbacks = append(g.Fallbacks, goldenFallback(f))
	}
	for _, p := range r.Replies {
		g.Replies = append(g.Replies, goldenText(p))
	}
	for _, td := range r.Todos {
		g.Todos = append(g.Todos, goldenTodo{toGoldenTime(td.Time), td.Text, td.Line})
	}
	for _, e := range r.Errors {
		g.Errors = append(g.Errors, e.Error())
	}
	for _, e := range r.Warnings {
		g.Warnings = append(g.Warnings, e.Error())
	}
	return g
}

// TestGolden parses realistic agent outputs (testdata/*.txt) in Europe/Berlin and compares the
// results with testdata/*.golden. Run `go test ./marker -run TestGolden -update` to rewrite them.
func TestGolden(t *testing.T) {
	loc := mustLoad(t, "Europe/Berlin")
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("only %d golden inputs found", len(files))
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".txt")
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err := Parse(f, loc)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(toGolden(r)); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			golden := strings.TrimSuffix(in, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run with -update if the change is intended):\n%s", in, golden, got)
			}
		})
	}
}
