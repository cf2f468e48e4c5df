package marker

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// ParseError is one problem found in an agent's output. Every one names the line it was found
// on (the caller's numbering), so that the operator can find it with `cryochamber log`.
type ParseError struct {
	Line    int    // line number as the caller counted it (Parse counts from 1)
	Keyword string // EXIT, WAKE, CMD, PLAN, FALLBACK, REPLY or TODO; "" when no known keyword applies
	Msg     string // what is wrong, usually beginning with the keyword and the marker's text
	Err     error  // the error from ParseTime or SplitCommand behind Msg, if any
	seq     int    // order of discovery within a Parser, to sort the problems of one line
}

// Error returns "line N: " followed by Msg.
func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Unwrap returns the underlying error, if any.
func (e *ParseError) Unwrap() error { return e.Err }

// maxQuoted is how many runes of agent text an error message quotes: enough to recognise the
// marker, short enough that an error in a 64 KiB marker still makes a readable e-mail.
const maxQuoted = 60

// quote returns s as a Go string literal, cut to maxQuoted runes. strconv.Quote escapes control
// characters and invalid UTF-8, so untrusted text cannot smuggle a line break into a message.
func quote(s string) string {
	if utf8.RuneCountInString(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	n := 0
	for i := range s {
		if n == maxQuoted {
			return strconv.Quote(s[:i] + "...")
		}
		n++
	}
	return strconv.Quote(s)
}

// subject names a marker in a message: `WAKE "banana"`, or just `WAKE` when it has no text.
func subject(kw, text string) string {
	if text == "" {
		return kw
	}
	return kw + " " + quote(text)
}

// capped is a list of problems that stops growing at maxReported entries, so that an agent
// printing millions of bad markers cannot exhaust memory; the rest are only counted.
type capped struct {
	list         []*ParseError
	dropped      int
	firstDropped int // line of the first problem that was only counted
}

// maxReported bounds each list of problems the parser keeps.
const maxReported = 100

func (c *capped) add(e *ParseError) {
	if len(c.list) < maxReported {
		c.list = append(c.list, e)
		return
	}
	c.count(1, e.Line)
}

func (c *capped) count(n, line int) {
	if n == 0 {
		return
	}
	if c.dropped == 0 || line < c.firstDropped {
		c.firstDropped = line
	}
	c.dropped += n
}

// appendTo appends the kept problems, and one line that says how many were left out.
func (c *capped) appendTo(dst []*ParseError, what string) []*ParseError {
	dst = append(dst, c.list...)
	if c.dropped > 0 {
		dst = append(dst, &ParseError{
			Line: c.firstDropped,
			Msg:  fmt.Sprintf("%d more %s from this line on are not shown", c.dropped, what),
			seq:  math.MaxInt, // after the problems of the same line that are shown
		})
	}
	return dst
}
