package termtext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// sanitizeReference is Append as it was before its printable-ASCII fast path, one byte
// or rune at a time: the fast path must never change what the log records.
func sanitizeReference(dst, src []byte, inRun bool) ([]byte, bool) {
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			inRun = false
			if c < 0x20 && c != '\t' || c == 0x7f {
				dst = append(dst, replacement...)
			} else {
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size == 1 {
			if !inRun {
				dst = append(dst, replacement...)
			}
			inRun = true
			i++
			continue
		}
		inRun = false
		if r >= 0x80 && r <= 0x9f {
			dst = append(dst, replacement...)
		} else {
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	return dst, inRun
}

var sanitizeCases = []struct {
	name string
	in   string
	run  bool
}{
	{"empty", "", false},
	{"ascii", "plain text, 100% ASCII ~", false},
	{"tab", "a\tb\t", false},
	{"controls", "a\x00b\x1bc\x7fd\re", false},
	{"utf8", "übersicht → ✓ 日本", false},
	{"c1", "a\u0085b\u009fc", false},
	{"invalid run", "a\xff\xfe\xfdb", false},
	{"run continues", "\xffabc", true},
	{"run then ascii", "\xff\xffx", true},
	{"cut sequence", "ok \xe2\x9c", false},
	{"surrogate", "\xed\xa0\x80x", false},
	{"all bytes", allBytes(), false},
	{"long ascii", strings.Repeat("0123456789 ~}", 9), false},
	{"word edges", "\x1f !~\x7f\x80 \x20\x7e\x7f\x19abcdefgh\x1fabcdefg~\x7fabcdefgh", false},
}

func allBytes() string {
	var b []byte
	for c := 0; c < 256; c++ {
		b = append(b, byte(c))
	}
	return string(b)
}

func TestSanitizeMatchesReference(t *testing.T) {
	for _, tt := range sanitizeCases {
		t.Run(tt.name, func(t *testing.T) {
			want, wantRun := sanitizeReference([]byte("x"), []byte(tt.in), tt.run)
			got, gotRun := Append([]byte("x"), []byte(tt.in), tt.run)
			if !bytes.Equal(got, want) || gotRun != wantRun {
				t.Errorf("Append(%q, %v) = %q, %v; the reference gives %q, %v", tt.in, tt.run, got, gotRun, want, wantRun)
			}
			if !utf8.Valid(got) {
				t.Errorf("Append(%q) = %q: not valid UTF-8", tt.in, got)
			}
		})
	}
}

func FuzzSanitizeMatchesReference(f *testing.F) {
	for _, tt := range sanitizeCases {
		f.Add([]byte(tt.in), tt.run)
	}
	// The edges of the inline two- and three-byte checks: C1 controls and the first byte after
	// them, overlong forms, surrogates, cut sequences, U+FFFD itself.
	for _, in := range []string{"a\xc2\x80b", "a\xc2\x9fb", "a\xc2\xa0b", "\xdf\xbf", "\xc1\xbf", "\xe0\x9f\x80", "\xe0\xa0\x80",
		"\xed\x9f\xbf", "\xed\xa0\x80", "\xef\xbf\xbd", "x\xc3", "x\xe2\x82", "\xe2\x82\xacx\xe2\x28\xa1", "\xf0\x9f\x98\x80"} {
		f.Add([]byte(in), false)
		f.Add([]byte(in), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, run bool) {
		want, wantRun := sanitizeReference(nil, in, run)
		got, gotRun := Append(nil, in, run)
		if !bytes.Equal(got, want) || gotRun != wantRun {
			t.Fatalf("Append(%q, %v) = %q, %v; the reference gives %q, %v", in, run, got, gotRun, want, wantRun)
		}
	})
}

// BenchmarkSanitize is the hot loop of a session that prints a lot, on agent-like text (mostly
// ASCII, some UTF-8, a tab now and then) and on the reference implementation for comparison.
func BenchmarkSanitize(b *testing.B) {
	for _, in := range []struct {
		name string
		line []byte
	}{
		{"ascii", []byte(strings.Repeat("checking the build of PR #41: the tests passed, deploying ", 20))},
		{"mixed", []byte(strings.Repeat("checking the build of PR #41: übersicht ✓ tests passed\t", 20))},
	} {
		benchSanitize(b, in.name, in.line)
	}
}

func benchSanitize(b *testing.B, name string, line []byte) {
	for _, impl := range []struct {
		name string
		fn   func([]byte, []byte, bool) ([]byte, bool)
	}{{"fast", Append}, {"reference", sanitizeReference}} {
		b.Run(name+"/"+impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			var dst []byte
			for i := 0; i < b.N; i++ {
				dst, _ = impl.fn(dst[:0], line, false)
			}
		})
	}
}

func TestTextKeepsLinesAndRemovesEscapes(t *testing.T) {
	in := "hello\x1b]52;c;cHduZWQ=\x07\r\nsecond \x1b[2J line\n"
	want := "hello\uFFFD]52;c;cHduZWQ=\uFFFD\nsecond \uFFFD[2J line\n"
	if got := Text(in); got != want {
		t.Errorf("Text(%q) = %q, want %q", in, got, want)
	}
}
