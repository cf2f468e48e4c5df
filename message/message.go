// Package message holds the chamber's mailbox: message files in messages/inbox/,
// messages/inbox/archive/ and messages/outbox/.
//
// A message is a small text file: front matter (one `key: value` per line between `---` lines)
// and a body. Names sort by creation time and are published with link(2), so a message is never
// seen half-written and never overwrites another. This package never runs sessions and never
// delivers anything; it only reads, writes and moves files.
package message

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// Directories of a chamber's mailbox, relative to the chamber.
const (
	InboxDir   = "messages/inbox"
	ArchiveDir = "messages/inbox/archive"
	OutboxDir  = "messages/outbox"
)

// Limits on untrusted message files.
const (
	MaxSize      = 1 << 20 // a whole message file
	maxHeaderLen = 4096    // one front-matter value
)

// Kind says what a message is.
const (
	KindMessage = "message" // written by a person (send) or a sync tool
	KindReply   = "reply"   // the agent's REPLY, or cryochamber's reply on its behalf
	KindAlert   = "alert"   // a dead-man or failure alert
	KindNotice  = "notice"  // something a session wants the operator to see
	KindSummary = "summary" // a session's EXIT summary, filed by cryochamber (summaries = "outbox")
)

// Message is one message file.
type Message struct {
	ID        string    // the file name without ".md"
	From      string    // who wrote it
	To        string    // optional
	Subject   string    // optional
	Time      time.Time // when it was written (UTC)
	Kind      string    // KindMessage, KindReply, KindAlert, KindNotice
	Session   int       // the session it belongs to (replies, alerts), 0 if none
	InReplyTo []string  // IDs of the messages a reply answers
	Delivery  string    // for alerts: how delivery went ("" = not tried)
	Seal      string    // cryochamber's seal on what it filed in the outbox (seal.go)
	Body      string
}

// ParseError is a message file that cannot be read.
type ParseError struct {
	Name string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Name, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Name, e.Msg)
}

// Marshal renders the message file. Header values must be single lines: a newline in a value
// would let text from a marker inject other headers, so it is refused.
func (m *Message) Marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("---\n")
	put := func(k, v string) error {
		if v == "" {
			return nil
		}
		if err := checkValue(v); err != nil {
			return fmt.Errorf("message %s: %w", k, err)
		}
		fmt.Fprintf(&b, "%s: %s\n", k, v)
		return nil
	}
	for _, kv := range [][2]string{
		{"from", m.From}, {"to", m.To}, {"subject", m.Subject},
		{"time", m.Time.UTC().Format(time.RFC3339Nano)}, {"kind", m.Kind},
	} {
		if err := put(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	if m.Session > 0 {
		_ = put("session", strconv.Itoa(m.Session))
	}
	if len(m.InReplyTo) > 0 {
		if err := put("in-reply-to", strings.Join(m.InReplyTo, " ")); err != nil {
			return nil, err
		}
	}
	if err := put("delivery", m.Delivery); err != nil {
		return nil, err
	}
	if err := put("seal", m.Seal); err != nil {
		return nil, err
	}
	b.WriteString("---\n")
	if !utf8.ValidString(m.Body) {
		return nil, errors.New("message body is not valid UTF-8")
	}
	b.WriteString(m.Body)
	if m.Body != "" && !strings.HasSuffix(m.Body, "\n") {
		b.WriteByte('\n')
	}
	if b.Len() > MaxSize {
		return nil, fmt.Errorf("message is %d bytes, more than the %d allowed", b.Len(), MaxSize)
	}
	return b.Bytes(), nil
}

func checkValue(v string) error {
	if !utf8.ValidString(v) {
		return errors.New("not valid UTF-8")
	}
	if len(v) > maxHeaderLen {
		return fmt.Errorf("longer than %d bytes", maxHeaderLen)
	}
	for _, r := range v {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return fmt.Errorf("contains a control character (%U)", r)
		}
	}
	return nil
}

// Parse reads a message file. name is used in errors and as the ID.
func Parse(name string, data []byte) (*Message, error) {
	perr := func(line int, format string, args ...any) error {
		return &ParseError{Name: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxSize {
		return nil, perr(0, "%d bytes, more than the %d allowed", len(data), MaxSize)
	}
	if !utf8.Valid(data) {
		return nil, perr(0, "not valid UTF-8")
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, perr(0, "contains a NUL byte")
	}
	m := &Message{ID: strings.TrimSuffix(name, ".md"), Kind: KindMessage}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxSize)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return strings.TrimSuffix(sc.Text(), "\r"), true
	}
	first, ok := next()
	if !ok || first != "---" {
		// No front matter: the whole file is the body (a message dropped in by hand).
		m.Body = string(data)
		return m, nil
	}
	seen := map[string]bool{}
	for {
		l, ok := next()
		if !ok {
			if err := sc.Err(); err != nil {
				return nil, perr(line, "%v", err)
			}
			return nil, perr(line, "front matter not closed with ---")
		}
		if l == "---" {
			break
		}
		k, v, found := strings.Cut(l, ":")
		if !found {
			return nil, perr(line, "want `key: value` in the front matter, got %q", clip(l))
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if seen[k] {
			return nil, perr(line, "duplicate key %q", k)
		}
		seen[k] = true
		if err := checkValue(v); err != nil {
			return nil, perr(line, "%s: %v", k, err)
		}
		switch k {
		case "from":
			m.From = v
		case "to":
			m.To = v
		case "subject":
			m.Subject = v
		case "time":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return nil, perr(line, "time %q is not RFC 3339", clip(v))
			}
			m.Time = t.UTC()
		case "kind":
			switch v {
			case KindMessage, KindReply, KindAlert, KindNotice, KindSummary:
				m.Kind = v
			default:
				return nil, perr(line, "unknown kind %q", clip(v))
			}
		case "session":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, perr(line, "session %q is not a number", clip(v))
			}
			m.Session = n
		case "in-reply-to":
			m.InReplyTo = strings.Fields(v)
		case "delivery":
			m.Delivery = v
		case "seal":
			m.Seal = v
		default:
			// Unknown keys are kept out of the way rather than refused: sync tools may add
			// their own. They are not shown to the agent.
		}
	}
	// The body is everything after the closing ---, byte for byte.
	off := 0
	for i := 0; i < line; i++ {
		j := bytes.IndexByte(data[off:], '\n')
		if j < 0 {
			off = len(data)
			break
		}
		off += j + 1
	}
	m.Body = string(data[off:])
	return m, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// NewID makes a message file name (without ".md") that sorts by time: UTC time to the
// nanosecond, a slug of who wrote it, and random bits so two writers never collide.
func NewID(now time.Time, from string) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return now.UTC().Format("20060102T150405.000000000Z") + "-" + slug(from) + "-" + hex.EncodeToString(rnd[:])
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= 24 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "anon"
	}
	return out
}

// Write publishes m into the directory dir of the chamber fs (message.InboxDir, ...) and returns
// the file's name: under m.ID when set (os.ErrExist if that name is taken), else under a fresh
// name from NewID. The file (0600, in a 0700 directory: messages are private like the log) is
// written to a hidden temporary file, fsynced, then linked to its final name: link(2) fails
// rather than replace an existing file, so no message ever overwrites another, and a symlink
// planted under that name is never followed.
func Write(fs *confined.Dir, dir string, m *Message) (string, error) {
	if m.Time.IsZero() {
		return "", errors.New("message has no time")
	}
	data, err := m.Marshal()
	if err != nil {
		return "", err
	}
	if err := fs.MkdirAll(dir, DirMode); err != nil {
		return "", err
	}
	if m.ID != "" {
		// A caller-chosen name makes the write idempotent: a second write of the same message
		// (a recovery re-running a step) finds it there and reports os.ErrExist.
		if !ValidName(m.ID + ".md") {
			return "", fmt.Errorf("message name %q is not a valid message name", m.ID)
		}
		name := m.ID + ".md"
		return name, fs.CreateNew(path.Join(dir, name), data, FileMode)
	}
	for attempt := 0; attempt < 8; attempt++ {
		id := NewID(m.Time, m.From)
		err := fs.CreateNew(path.Join(dir, id+".md"), data, FileMode)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		m.ID = id
		return id + ".md", nil
	}
	return "", fmt.Errorf("could not find a free message name in %s", dir)
}

// Modes of the mailbox: messages are as private as the log.
const (
	FileMode = 0o600
	DirMode  = 0o700
)

// ValidName reports whether name is a message file name cryochamber would use: one path
// element, not hidden, ending in ".md", of letters, digits, '.', '-' and '_' only. Names read
// from anywhere (a claim list, a directory) are checked before they are used as paths.
func ValidName(name string) bool {
	if len(name) < 4 || len(name) > 200 || name[0] == '.' || !strings.HasSuffix(name, ".md") {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

// Names lists the message files of the directory dir of the chamber fs in time order. Only
// regular files with a valid message name and one name count: a symlink, a FIFO, a directory, a
// hidden or temporary file is not a message, and neither is a file with two names (a message
// being published, between its link(2) and the removal of its temporary name, or a hard link to
// a file elsewhere, which Read would refuse). A message left with two names by a publish killed
// between the two steps is settled (confined.Dir.Settle) and listed.
func Names(fs *confined.Dir, dir string) ([]string, error) {
	ents, err := fs.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !ValidName(n) {
			continue
		}
		if fi, err := e.Info(); err != nil {
			continue
		} else if l := confined.Links(fi); l > 1 && (l > 2 || fs.Settle(path.Join(dir, n)) == "") {
			// Two names, unless the other is the stray temporary name of a publish that was
			// killed after its link(2), which Settle removes: the message is then read as ever
			// (left there, it would never be read, and a sync would stop at it).
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Count is how many names of dir look like messages (regular files with a message name),
// from the directory listing alone: nothing is opened or stat'ed, so it costs the same for a
// month of hourly replies as Names costs for a handful. A message being published and a hard
// link count too (Names leaves them out); it is the number `status` shows, not a list to read.
func Count(fs *confined.Dir, dir string) (int, error) {
	ents, err := fs.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if e.Type().IsRegular() && ValidName(e.Name()) {
			n++
		}
	}
	return n, nil
}

// Read loads one message file, bounded by MaxSize. A name that is not a regular file (a symlink
// to a private key, a FIFO) is refused without being followed or waited on.
func Read(fs *confined.Dir, dir, name string) (*Message, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%q is not a message name", name)
	}
	data, err := fs.ReadFile(path.Join(dir, name), MaxSize)
	if err != nil {
		return nil, err
	}
	return Parse(name, data)
}

// Month directories: messages older than a few weeks are moved out of the live directories
// into one directory per month, so that the directories every command lists stay small
// whatever the age of the chamber (a chamber answering every hour writes 8,760 replies a
// year).

// MonthLayout names a month directory: "2026-11".
const MonthLayout = "2006-01"

// namePrefix is the UTC time every message name cryochamber makes starts with (NewID, replies,
// notices, alerts, messages a sync pulled), to the second.
const namePrefix = "20060102T150405"

// monthOf is the month directory of a message name, or "" when the name does not start with
// a time.
func monthOf(name string) string {
	if len(name) < len(namePrefix) {
		return ""
	}
	if _, err := time.Parse(namePrefix, name[:len(namePrefix)]); err != nil {
		return ""
	}
	return name[:4] + "-" + name[4:6]
}

// Months lists the month directories of dir (see Rotate), oldest first. Anything else in dir
// (a file, a symlink, another name) is not a month.
func Months(fs *confined.Dir, dir string) ([]string, error) {
	ents, err := fs.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var months []string
	for _, e := range ents {
		if !e.IsDir() || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		if t, err := time.Parse(MonthLayout, e.Name()); err == nil && t.Format(MonthLayout) == e.Name() {
			months = append(months, e.Name())
		}
	}
	sort.Strings(months)
	return months, nil
}

// Rotate moves every message of dir named before cutoff (by the UTC time its name starts with)
// into the month directory dir/YYYY-MM of that time (created 0700), and returns how many it
// moved. A name without a time stays. Each move is a link(2) then the removal of the old name,
// so a message is never lost nor overwritten: a crash in between leaves it under both names,
// which the next Rotate resolves. A month name that is not a real directory (a symlink, a file)
// is left alone, with the messages of that month.
func Rotate(fs *confined.Dir, dir string, cutoff time.Time) (int, error) {
	// Not Names: a message left under two names by a Rotate that died between its link and the
	// removal is one to finish moving (Names leaves out files with two names). Rotate never
	// reads a message, so a hard link to a file elsewhere is only moved, never opened.
	ents, err := fs.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && ValidName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	limit := cutoff.UTC().Format(namePrefix)
	moved := 0
	made := map[string]bool{}
	for _, name := range names {
		month := monthOf(name)
		if month == "" || name[:len(namePrefix)] >= limit {
			continue
		}
		sub := path.Join(dir, month)
		if ok, seen := made[sub]; !seen {
			if err := fs.MkdirAll(sub, DirMode); err == nil {
				fi, err := fs.Lstat(sub)
				ok = err == nil && fi.IsDir()
			}
			made[sub] = ok
			if !ok {
				continue
			}
		} else if !ok {
			continue
		}
		from, to := path.Join(dir, name), path.Join(sub, name)
		if err := fs.Link(from, to); err != nil {
			if !errors.Is(err, os.ErrExist) {
				return moved, fmt.Errorf("move %s to %s: %w", from, sub, err)
			}
			// Already there: the same file (a Rotate that died after its link), or another
			// message under the same name, which is then left where it is.
			a, aerr := fs.Lstat(from)
			b, berr := fs.Lstat(to)
			if aerr != nil || berr != nil || !os.SameFile(a, b) {
				continue
			}
		}
		if err := fs.Remove(from); err != nil {
			return moved, fmt.Errorf("move %s to %s: %w", from, sub, err)
		}
		moved++
	}
	if moved > 0 {
		for sub, ok := range made {
			if ok {
				if err := fs.SyncDir(sub); err != nil {
					return moved, err
				}
			}
		}
		if err := fs.SyncDir(dir); err != nil {
			return moved, err
		}
	}
	return moved, nil
}
