package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
)

// Live updates are Server-Sent Events fed by following the log, as `cryochamber log --follow`
// does: a chamber's page receives the lines of its latest block as they are appended, and both
// pages hear when a session starts or ends. The log's block boundaries are lines cryochamber
// writes itself (an agent's output is always prefixed, so it cannot forge one).
//
// Events:
//
//	event: log      data: {"session": N, "reset": bool, "skipped": n, "lines": ["| ...", ...]}
//	                (chamber page; reset: a new block began, drop the lines shown so far)
//	event: changed  data: {"id": "cryo-...", "session": N, "running": bool}
//	                (a session started or ended and the chamber's state has settled: reload)

// Bounds of a stream.
const (
	maxLiveLines = 1000                   // lines of a block kept for the next batch
	batchEvery   = 100 * time.Millisecond // at most ten batches a second
	pingEvery    = 20 * time.Second       // a comment, so a dead connection is noticed
	writeTimeout = 30 * time.Second       // a client that stops reading is dropped
	settleFor    = 2 * time.Minute        // how long an ended session may take to hibernate
	settlePoll   = 200 * time.Millisecond
	relistEvery  = time.Minute // the overview looks for new chambers this often
)

var (
	headerLine = regexp.MustCompile(`^--- CRYO SESSION ([0-9]+) `)
	endLine    = regexp.MustCompile(`^--- CRYO END ([0-9]+) `)
)

// boundary reports whether a log line starts ("header") or ends ("end") a block, and which.
func boundary(l string) (kind string, n int) {
	if m := headerLine.FindStringSubmatch(l); m != nil {
		n, _ = strconv.Atoi(m[1])
		return "header", n
	}
	if m := endLine.FindStringSubmatch(l); m != nil {
		n, _ = strconv.Atoi(m[1])
		return "end", n
	}
	return "", 0
}

// tracker turns the block boundaries that following the log shows into session starts and
// ends. It starts from what the chamber's state said when the stream opened, so the latest
// block, which following the log prints first, is not taken for news.
type tracker struct {
	session int
	running bool
}

// header reports whether a SESSION line of session n is a session that started since.
func (t *tracker) header(n int) bool {
	if n <= t.session {
		return false
	}
	t.session, t.running = n, true
	return true
}

// end reports whether an END line of session n ends a session the tracker saw running.
func (t *tracker) end(n int) bool {
	if n < t.session || n == t.session && !t.running {
		return false
	}
	t.session, t.running = n, false
	return true
}

// lineStream receives what following the log prints. It keeps the lines of the latest block
// (at most maxLiveLines of them, for the next batch) and reports block boundaries.
type lineStream struct {
	mu       sync.Mutex
	part     []byte
	lines    []string
	skipped  int
	session  int
	reset    bool
	keep     bool                     // keep lines (a chamber page) or only watch boundaries
	onBorder func(kind string, n int) // called with mu held: must not block
	notify   chan struct{}
}

func newLineStream(keep bool, onBorder func(string, int)) *lineStream {
	return &lineStream{keep: keep, onBorder: onBorder, notify: make(chan struct{}, 1)}
}

func (s *lineStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.part) < 1<<20 {
				s.part = append(s.part, p...)
			}
			break
		}
		s.line(string(append(s.part, p[:i]...)))
		s.part = s.part[:0]
		p = p[i+1:]
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return n, nil
}

func (s *lineStream) line(l string) {
	kind, n := boundary(l)
	if kind == "header" {
		s.lines, s.skipped, s.session, s.reset = s.lines[:0], 0, n, true
	}
	if kind != "" && s.onBorder != nil {
		s.onBorder(kind, n)
	}
	if !s.keep {
		return
	}
	s.lines = append(s.lines, l)
	if len(s.lines) > maxLiveLines {
		cut := len(s.lines) - maxLiveLines
		s.lines = append(s.lines[:0], s.lines[cut:]...)
		s.skipped += cut
	}
}

// LogBatch is the data of a "log" event: the lines of the latest block since the last one.
type LogBatch struct {
	Session int      `json:"session"`
	Reset   bool     `json:"reset"`
	Skipped int      `json:"skipped"`
	Lines   []string `json:"lines"`
}

// take returns the lines since the last batch (nil when there are none).
func (s *lineStream) take() *LogBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lines) == 0 && !s.reset && s.skipped == 0 {
		return nil
	}
	b := &LogBatch{Session: s.session, Reset: s.reset, Skipped: s.skipped, Lines: append([]string{}, s.lines...)}
	s.lines, s.skipped, s.reset = s.lines[:0], 0, false
	return b
}

// ChangeEvent is the data of a "changed" event: a session started (Running) or ended and
// hibernated. An empty ID means the list of chambers changed.
type ChangeEvent struct {
	ID      string `json:"id"`
	Session int    `json:"session"`
	Running bool   `json:"running"`
}

// sse writes one stream of events.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE answers with an event stream; for a HEAD request it answers the headers alone and
// returns nil (there is no stream to keep open).
func startSSE(w http.ResponseWriter, r *http.Request) (*sse, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil, nil
	}
	e := &sse{w: w, rc: http.NewResponseController(w)}
	return e, e.raw("retry: 3000\n\n")
}

func (e *sse) raw(s string) error {
	_ = e.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := e.w.Write([]byte(s)); err != nil {
		return err
	}
	return e.rc.Flush()
}

// send writes one event; data is JSON, so it never holds a line break.
func (e *sse) send(event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return e.raw("event: " + event + "\ndata: " + string(b) + "\n\n")
}

// settle waits until the chamber's state no longer says running (an ended session still
// validates, arms its timers and answers its messages after its END line), then reports it.
func (s *Server) settle(ctx context.Context, dir string, n int, out chan<- ChangeEvent) {
	v := s.src.open()
	defer v.close()
	deadline := s.now().Add(settleFor)
	for {
		st, err := v.status(ctx, dir)
		if err != nil || st.Phase != chamber.PhaseRunning || st.Session > n || !s.now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(settlePoll):
		}
	}
	select {
	case out <- ChangeEvent{ID: chamberID(dir), Session: n}:
	case <-ctx.Done():
	}
}

// watch follows one chamber's log until ctx ends, reporting sessions that start and end.
func (s *Server) watch(ctx context.Context, dir string, from tracker, keep bool, out chan<- ChangeEvent) *lineStream {
	tr := from
	ls := newLineStream(keep, func(kind string, n int) {
		switch {
		case kind == "header" && tr.header(n):
			// Not here: this runs while the stream holds its lock.
			go func() {
				select {
				case out <- ChangeEvent{ID: chamberID(dir), Session: n, Running: true}:
				case <-ctx.Done():
				}
			}()
		case kind == "end" && tr.end(n):
			go s.settle(ctx, dir, n, out)
		}
	})
	go func() {
		v := s.src.open()
		defer v.close()
		if err := v.log(ctx, dir, 0, true, ls); err != nil && ctx.Err() == nil {
			s.logf("following the log of %s: %v", dir, err)
		}
	}()
	return ls
}

// chamberEvents streams one chamber's latest block and its session starts and ends.
func (s *Server) chamberEvents(w http.ResponseWriter, r *http.Request) {
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	st, err := v.status(r.Context(), dir)
	v.close()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changes := make(chan ChangeEvent, 16)
	ls := s.watch(ctx, dir, tracker{session: st.Session, running: st.Phase == chamber.PhaseRunning}, true, changes)
	e, err := startSSE(w, r)
	if e == nil || err != nil {
		return
	}
	s.stream(ctx, e, ls, changes, nil)
}

// overviewEvents streams the session starts and ends of every chamber.
func (s *Server) overviewEvents(w http.ResponseWriter, r *http.Request) {
	v := s.src.open()
	rows, err := v.ps(r.Context())
	v.close()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.remember(rows)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changes := make(chan ChangeEvent, 64)
	known := map[string]bool{}
	for _, row := range rows {
		if filepath.IsAbs(row.Dir) && row.State != "missing" {
			known[row.Dir] = true
			s.watch(ctx, row.Dir, tracker{session: row.Session, running: row.Phase == chamber.PhaseRunning}, false, changes)
		}
	}
	e, err := startSSE(w, r)
	if e == nil || err != nil {
		return
	}
	// New chambers (started since the page loaded) and chambers gone: the page reloads.
	relist := func() bool {
		v := s.src.open()
		defer v.close()
		rows, err := v.ps(ctx)
		if err != nil {
			return false
		}
		now := map[string]bool{}
		for _, row := range rows {
			if filepath.IsAbs(row.Dir) {
				now[row.Dir] = true
			}
		}
		if len(now) != len(known) {
			return true
		}
		for d := range now {
			if !known[d] {
				return true
			}
		}
		return false
	}
	s.stream(ctx, e, nil, changes, relist)
}

// stream writes events until the client goes, the server shuts down or a write fails.
func (s *Server) stream(ctx context.Context, e *sse, ls *lineStream, changes <-chan ChangeEvent, relist func() bool) {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	var batches <-chan time.Time
	if ls != nil {
		t := time.NewTicker(batchEvery)
		defer t.Stop()
		batches = t.C
	}
	var relists <-chan time.Time
	if relist != nil {
		t := time.NewTicker(relistEvery)
		defer t.Stop()
		relists = t.C
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-batches:
			if b := ls.take(); b != nil {
				err = e.send("log", b)
			}
		case c := <-changes:
			if ls != nil {
				// The lines before the change go first.
				if b := ls.take(); b != nil {
					err = e.send("log", b)
				}
			}
			if err == nil {
				err = e.send("changed", c)
			}
		case <-relists:
			if relist() {
				err = e.send("changed", ChangeEvent{})
			}
		case <-ping.C:
			err = e.raw(": ping\n\n")
		}
		if err != nil {
			if ctx.Err() == nil {
				s.logf("event stream: %v", fmt.Errorf("client dropped: %w", err))
			}
			return
		}
	}
}
