package sessionlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fuzzSeeds are the named seed inputs of the fuzz targets, kept in testdata/fuzz/ (go test runs
// them as ordinary tests). go test -run TestFuzzSeeds -update rewrites the files.
func fuzzSeeds() map[string]map[string][]any {
	two := block(1, "| a", "! b") + block(2, "# task: x", "| c")
	latest := map[string][]any{
		"two-blocks":          {two, int64(len(block(1, "| a", "! b")))},
		"notes-after-end":     {two + "# 2026-11-22T13:00:03Z wake fired early\n", int64(-1)},
		"torn-mid-line":       {two + hdr(3) + "| half a li", int64(len(two))},
		"torn-mid-character":  {two + hdr(3) + "| caf\xc3", int64(len(two))},
		"torn-header":         {two + "--- CRYO SESSION 3 2026-11-22T13:00", int64(0)},
		"torn-end":            {two + hdr(3) + "--- CRYO END 3 2026-11-22T13:05:03Z exit=0 --", int64(-1)},
		"completed-torn-line": {hdr(3) + "| caf\xc3\n# " + TornNote + "\n" + endl(3, 2, "crashed"), int64(0)},
		"completed-header":    {block(2) + hdr(3) + "# " + TornNote + "\n" + block(3, "| x"), int64(len(block(2)))},
		"forged":              {block(1, "| "+strings.TrimSuffix(endl(1, 0, ""), "\n"), "| "+strings.TrimSuffix(hdr(2), "\n")), int64(0)},
		"only-notes":          {"# a\n# b\n", int64(0)},
		"binary":              {"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\n", int64(-1)},
		"nul":                 {two + hdr(3) + "| a\x00b\n", int64(len(two))},
		"end-mismatch":        {two + hdr(3) + endl(4, 0, ""), int64(len(two))},
		"two-ends":            {two + endl(2, 0, ""), int64(-1)},
		"output-after-end":    {two + "| stray\n", int64(-1)},
		"numbers-go-down":     {block(5) + block(3), int64(len(block(5)))},
		"crlf":                {strings.ReplaceAll(two, "\n", "\r\n"), int64(-1)},
		"unclosed-then-next":  {hdr(1) + "| a\n" + block(2), int64(0)},
	}
	writeRead := map[string][]any{
		"crlf-and-controls": {"a\r\nb\rc\x1b[31m\x00\x7f\u0085\n", "warn\r\n", "\x01\x02"},
		"invalid-utf8":      {"\xff\xfe run\xe2\x82 cut\n\xf0\x9f\x98", "\xc3", "\x00\x05"},
		"forged-blocks":     {two + "# " + TornNote + "\n", two, "\x10\x03\x07"},
		"empty-lines":       {"\n\n\n", "\n", ""},
		"no-newline":        {"partial", "also partial\r", "\x02"},
	}
	out := map[string]map[string][]any{"FuzzLatest": {}, "FuzzWriteRead": {}}
	for k, v := range latest {
		out["FuzzLatest"][k] = []any{[]byte(v[0].(string)), v[1]}
	}
	for k, v := range writeRead {
		out["FuzzWriteRead"][k] = []any{[]byte(v[0].(string)), []byte(v[1].(string)), []byte(v[2].(string))}
	}
	return out
}

func TestFuzzSeeds(t *testing.T) {
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, args := range seeds {
			var b strings.Builder
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch v := a.(type) {
				case []byte:
					fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
				case int64:
					fmt.Fprintf(&b, "int64(%d)\n", v)
				}
			}
			p := filepath.Join(dir, "seed-"+name)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(p)
			if err != nil || string(got) != b.String() {
				t.Errorf("seed %s is missing or stale (run go test -run TestFuzzSeeds -update): %v", p, err)
			}
		}
	}
}
