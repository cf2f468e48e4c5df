// Package termtext makes text that an agent wrote (or that anyone could have put in a chamber)
// safe to print on the operator's terminal: no escape sequence, no control character, no invalid
// UTF-8 reaches it. It is the one sanitizer every command that prints such text uses (the session
// log, status, receive, validate); it never interprets the text. Line and Append never shorten
// it; OneLine, for a mail header or a status line, bounds it to the runes it is asked for.
package termtext

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"
)

// Line returns s safe to print on a terminal, as the session log records it: invalid UTF-8 runs become U+FFFD (as with
// strings.ToValidUTF8), and so do C0 controls other than tab, DEL and C1 controls. It does not
// treat newlines specially (a newline becomes U+FFFD): split lines first.
func Line(s string) string {
	b, _ := Append(nil, []byte(s), false)
	return string(b)
}

const replacement = "\uFFFD"

// printable marks the bytes sanitizeAppend copies as they are without decoding: tab and the
// printable ASCII characters (0x20 to 0x7e).
var printable = func() (t [256]bool) {
	t['\t'] = true
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	return t
}()

// allPrintable reports whether the 8 bytes in v are all printable ASCII (0x20 to 0x7e): no byte
// is below 0x20, and none is above 0x7e.
func allPrintable(v uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (v - 0x20*ones) & ^v & highs
	above := (v + (0x7f-0x7e)*ones | v) & highs
	return below|above == 0
}

// Append appends the sanitized form of src to dst. inRun says whether the bytes just
// before src ended in a run of invalid UTF-8 (its U+FFFD already written): a run that continues
// is not replaced twice, so feeding a line piecewise gives the same result as feeding it whole,
// provided no piece ends inside a UTF-8 sequence that the next piece completes.
//
// This is the hot loop of a session that prints a lot, and agent output is mostly clean: the
// longest run that needs no replacement (printable ASCII 8 bytes at a time where it can, tab,
// well-formed UTF-8 other than the C1 controls) is found first and copied as one slice
// (docs/BENCHMARKS.md has the figures; sanitize_bench_test.go holds it to the byte-at-a-time
// reference).
func Append(dst, src []byte, inRun bool) ([]byte, bool) {
	for i := 0; i < len(src); {
		j := i
		for j < len(src) {
			if j+8 <= len(src) && allPrintable(binary.LittleEndian.Uint64(src[j:])) {
				j += 8
				continue
			}
			c := src[j]
			if printable[c] {
				j++
				continue
			}
			if c < utf8.RuneSelf {
				break
			}
			// Two- and three-byte sequences (accented letters, most symbols) are checked here
			// without a call: well-formed, and for two bytes not a C1 control (0xC2 0x80 to
			// 0xC2 0x9F). Anything else goes through utf8.DecodeRune below.
			if c >= 0xC2 && c <= 0xDF && j+1 < len(src) {
				if c1 := src[j+1]; c1&0xC0 == 0x80 && (c != 0xC2 || c1 >= 0xA0) {
					j += 2
					continue
				}
			} else if c >= 0xE0 && c <= 0xEF && j+2 < len(src) {
				lo, hi := byte(0x80), byte(0xBF)
				switch c {
				case 0xE0:
					lo = 0xA0 // no overlong form
				case 0xED:
					hi = 0x9F // no surrogate
				}
				if c1, c2 := src[j+1], src[j+2]; c1 >= lo && c1 <= hi && c2&0xC0 == 0x80 {
					j += 3
					continue
				}
			}
			r, size := utf8.DecodeRune(src[j:])
			if r == utf8.RuneError && size == 1 || r <= 0x9f {
				break
			}
			j += size
		}
		if j > i {
			dst = append(dst, src[i:j]...)
			inRun = false
			i = j
			continue
		}
		// src[i] starts a control character, invalid UTF-8, or a C1 control.
		if src[i] < utf8.RuneSelf {
			dst = append(dst, replacement...)
			inRun = false
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
		dst = append(dst, replacement...) // a C1 control (U+0080 to U+009F)
		inRun = false
		i += size
	}
	return dst, inRun
}

// Text is Line for text of several lines: newlines are kept, a carriage return before a newline
// is dropped, and every line is sanitized.
func Text(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Line(strings.TrimSuffix(l, "\r"))
	}
	return strings.Join(lines, "\n")
}
