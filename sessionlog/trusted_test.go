package sessionlog

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/marker"
)

// closedBlock writes session n (a few stdout lines, one of them longer than a read chunk) to
// the log at p, closes it and returns its Ref.
func closedBlock(t *testing.T, p string, n int) Ref {
	t.Helper()
	b, err := Begin(p, n, t0.Add(time.Duration(n)*time.Hour), []string{"task: step"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stdout().Write([]byte("working\n" + strings.Repeat("y", 200<<10) + "\n[CRYO:EXIT 0] done\nno newline")); err != nil {
		t.Fatal(err)
	}
	if err := b.End(t0.Add(time.Duration(n)*time.Hour+time.Minute), 0, ""); err != nil {
		t.Fatal(err)
	}
	ref, ok := b.Ref()
	if !ok {
		t.Fatal("Block.Ref after a clean End: not ok")
	}
	return ref
}

func TestTrustedAgreesWithLatest(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cryo.log")
	closedBlock(t, p, 1)
	ref := closedBlock(t, p, 2)
	check := func(what string) {
		t.Helper()
		want, err := Latest(p, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Trusted(p, ref)
		if err != nil || got == nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Trusted = %+v, %v; Latest = %+v", what, got, err, want)
		}
	}
	check("closed block")
	// Notes between sessions (a wake that found nothing due) do not change the latest block.
	for i := 0; i < 3; i++ {
		if err := AppendNote(p, t0.Add(10*time.Hour), "wake: not due"); err != nil {
			t.Fatal(err)
		}
	}
	check("block, then notes")
}

// Whatever makes the Ref not describe the latest block any more, Trusted answers nil (read the
// log) rather than a block that is not there.
func TestTrustedRefuses(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, p string, ref *Ref)
	}{
		{"another session began", func(t *testing.T, p string, ref *Ref) {
			if _, err := Begin(p, ref.Session+1, t0.Add(time.Hour*9), nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"another block closed", func(t *testing.T, p string, ref *Ref) { closedBlock(t, p, ref.Session+1) }},
		{"cut short", func(t *testing.T, p string, ref *Ref) {
			if err := os.Truncate(p, ref.Offset+ref.Size-1); err != nil {
				t.Fatal(err)
			}
		}},
		{"torn note after it", func(t *testing.T, p string, ref *Ref) { appendRaw(t, p, "# half a no") }},
		{"output after it", func(t *testing.T, p string, ref *Ref) { appendRaw(t, p, "| stray\n") }},
		{"moved aside, fresh log", func(t *testing.T, p string, ref *Ref) {
			if _, err := MoveAside(p, t0); err != nil {
				t.Fatal(err)
			}
			closedBlock(t, p, ref.Session+1)
		}},
		{"offset off by one", func(t *testing.T, p string, ref *Ref) { ref.Offset++ }},
		{"size off by one", func(t *testing.T, p string, ref *Ref) { ref.Size-- }},
		{"another session number", func(t *testing.T, p string, ref *Ref) { ref.Session++ }},
		{"zero", func(t *testing.T, p string, ref *Ref) { *ref = Ref{} }},
		{"too many notes after it", func(t *testing.T, p string, ref *Ref) {
			appendRaw(t, p, strings.Repeat("# "+strings.Repeat("n", 1000)+"\n", notesMax/1000+1))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cryo.log")
			closedBlock(t, p, 1)
			ref := closedBlock(t, p, 2)
			if got, err := Trusted(p, ref); err != nil || got == nil {
				t.Fatalf("before the change: Trusted = %v, %v", got, err)
			}
			tt.change(t, p, &ref)
			if got, err := Trusted(p, ref); err != nil || got != nil {
				t.Fatalf("Trusted = %+v, %v; want nil", got, err)
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "cryo.log")
		ref := closedBlock(t, filepath.Join(dir, "real.log"), 1)
		if err := os.Symlink("real.log", p); err != nil {
			t.Fatal(err)
		}
		if got, err := Trusted(p, ref); err == nil || got != nil {
			t.Fatalf("Trusted through a symlink = %+v, %v; want an error", got, err)
		}
	})
}

func appendRaw(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// FuzzMayHoldMarker: a line MayHoldMarker passes over gives the marker parser nothing at all
// (no marker, no error, no warning), so the filter in front of OnStdoutLine never hides one.
func FuzzMayHoldMarker(f *testing.F) {
	for _, s := range []string{"", "[", "[CRYO:", "[cryo:EXIT 0]", "[CrYo:WAKE +1h]", "[CRY0:EXIT 0]", "x[[CRYO:PLAN a]", "[CRYO", "[ CRYO:EXIT 0]", "\u212a[cryo:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lower := []byte(s)
		for i, c := range lower {
			if c >= 'A' && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		may := MayHoldMarker([]byte(s))
		if want := strings.Contains(string(lower), "[cryo:"); may != want {
			t.Fatalf("MayHoldMarker(%q) = %v, want %v", s, may, want)
		}
		if may {
			return
		}
		p := marker.NewParser(time.UTC)
		p.Line(1, s)
		if r := p.Result(); !reflect.DeepEqual(r, marker.NewParser(time.UTC).Result()) {
			t.Fatalf("the parser found something in %q, which the filter passes over: %+v", s, r)
		}
	})
}
