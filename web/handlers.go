package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cryochamber/cryochamber/chamber"
)

// routes is every path the server answers. Nothing else is served: no request path names a
// file, and the chamber a request is about is found by its ID in what `ps` lists, never from
// a path in the request.
func (s *Server) routes() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /c/{id}", s.chamberPage)
	m.HandleFunc("GET /assets/{name}", serveAsset)

	m.HandleFunc("GET /api/ps", s.apiPs)
	m.HandleFunc("GET /api/events", s.overviewEvents)
	m.HandleFunc("GET /api/chambers/{id}/status", s.apiStatus)
	m.HandleFunc("GET /api/chambers/{id}/validate", s.apiValidate)
	m.HandleFunc("GET /api/chambers/{id}/messages", s.apiMessages)
	m.HandleFunc("GET /api/chambers/{id}/log", s.apiLog)
	m.HandleFunc("GET /api/chambers/{id}/history", s.apiHistory)
	m.HandleFunc("GET /api/chambers/{id}/events", s.chamberEvents)
	m.HandleFunc("POST /api/chambers/{id}/send", s.apiSend)
	m.HandleFunc("POST /api/chambers/{id}/wake", s.apiWake)
	m.HandleFunc("POST /api/chambers/{id}/cancel", s.apiCancel)
	m.HandleFunc("POST /api/chambers/{id}/pause", s.apiPause)
	m.HandleFunc("POST /api/chambers/{id}/resume", s.apiResume)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.deny(w, r, http.StatusNotFound, "no such page", "the dashboard is at /, its API under /api/ (see the README)")
	})
	return m
}

// errNoChamber is a chamber ID that `ps` does not list.
var errNoChamber = errors.New("no such chamber")

// validID accepts what timer.ID makes: "cryo-", then lower-case letters, digits and dashes.
func validID(id string) bool {
	if !strings.HasPrefix(id, "cryo-") || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// remember records the chambers `ps` listed. The ID is computed from the directory here,
// never taken from the row: a chamber whose timer.json names another chamber's ID must not
// take that chamber's page.
func (s *Server) remember(rows []chamber.PsRow) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	clear(s.dirs)
	for _, r := range rows {
		if filepath.IsAbs(r.Dir) {
			s.dirs[chamberID(r.Dir)] = r.Dir
		}
	}
}

// knownDirs are the chamber directories `ps` listed last.
func (s *Server) knownDirs() []string {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	dirs := make([]string, 0, len(s.dirs))
	for _, d := range s.dirs {
		dirs = append(dirs, d)
	}
	return dirs
}

// dirOf finds the chamber of an ID among the chambers `ps` lists (asking again when the ID
// is not among those listed last).
func (s *Server) dirOf(ctx context.Context, v *view, id string) (string, error) {
	if !validID(id) {
		return "", errNoChamber
	}
	s.idMu.Lock()
	dir, ok := s.dirs[id]
	s.idMu.Unlock()
	if ok {
		return dir, nil
	}
	rows, err := v.ps(ctx)
	if err != nil {
		return "", err
	}
	s.remember(rows)
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if dir, ok := s.dirs[id]; ok {
		return dir, nil
	}
	return "", errNoChamber
}

// chamberFor is the start of every handler about one chamber: the view and the directory, or
// an answer already written.
func (s *Server) chamberFor(w http.ResponseWriter, r *http.Request) (*view, string, bool) {
	v := s.src.open()
	dir, err := s.dirOf(r.Context(), v, r.PathValue("id"))
	if err != nil {
		v.close()
		if errors.Is(err, errNoChamber) {
			s.deny(w, r, http.StatusNotFound, "no such chamber", "the overview lists every chamber that `cryochamber ps` finds")
		} else {
			s.fail(w, r, err)
		}
		return nil, "", false
	}
	return v, dir, true
}

// statusLimit is how many chambers' statuses the overview gathers at once: each is a few file
// reads and two questions to the timer manager over one shared connection.
const statusLimit = 4

// statusOf is one chamber's status, or why there is none.
type statusOf struct {
	st  *chamber.StatusInfo
	err error
}

// gather returns the status of each chamber directory, statusLimit at a time.
func gather(ctx context.Context, v *view, dirs []string) map[string]statusOf {
	out := make(map[string]statusOf, len(dirs))
	var mu sync.Mutex
	sem := make(chan struct{}, statusLimit)
	var wg sync.WaitGroup
	for _, dir := range dirs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := v.summary(ctx, dir)
			mu.Lock()
			out[dir] = statusOf{st, err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// needsStatus says whether a row of ps has a status to show (a chamber that is gone has none).
func needsStatus(r chamber.PsRow) bool {
	return filepath.IsAbs(r.Dir) && !(r.State == "orphaned" && r.Phase == "")
}

// statusTTL is how long the overview reuses a chamber's status while ps shows the chamber
// unchanged (same state, session, next wake, last result, timers). A status costs a few file
// reads and two questions to the timer manager; the page reloads at every session's start and
// end, and a hundred chambers would be asked again each time for the one that changed. What
// only status shows (undelivered alerts, TODOs, warnings) is at most this old; a chamber's
// own page is always fresh.
const statusTTL = 30 * time.Second

type cachedStatus struct {
	row string // the ps row it went with
	st  statusOf
	at  time.Time
}

// rowKey is what ps says about a chamber: when it changes, its status is asked again.
func rowKey(r chamber.PsRow) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// cached returns the status remembered for a row of ps, if it is still good.
func (s *Server) cached(r chamber.PsRow, now time.Time) (statusOf, bool) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	c, ok := s.statuses[r.Dir]
	if !ok || c.row != rowKey(r) || now.Sub(c.at) >= s.statusTTL || c.st.err != nil {
		return statusOf{}, false
	}
	return c.st, true
}

func (s *Server) keep(rows []chamber.PsRow, sts map[string]statusOf, at time.Time) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	for _, r := range rows {
		if st, ok := sts[r.Dir]; ok {
			s.statuses[r.Dir] = cachedStatus{row: rowKey(r), st: st, at: at}
		}
	}
}

// forget drops the remembered status of a chamber that a request just changed.
func (s *Server) forget(dir string) {
	s.statusMu.Lock()
	delete(s.statuses, dir)
	s.statusMu.Unlock()
}

// staleDirs are the chambers ps listed last whose remembered status is too old or missing.
func (s *Server) staleDirs(now time.Time) []string {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	var dirs []string
	for _, d := range s.knownDirs() {
		if c, ok := s.statuses[d]; !ok || now.Sub(c.at) >= s.statusTTL {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// overview lists the chambers with ps and shows each with its status. The statuses that are
// not remembered (all of them, the first time) are gathered while ps lists the chambers again,
// so that the two share their questions to the timer manager (the view remembers each answer)
// instead of asking them one after the other; a chamber that ps shows changed is asked after.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := s.now()
	v := s.src.open()
	defer v.close()
	early := make(chan map[string]statusOf, 1)
	go func() { early <- gather(ctx, v, s.staleDirs(now)) }()
	rows, err := v.ps(ctx)
	sts := <-early
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.remember(rows)
	var late []string
	for _, row := range rows {
		if !needsStatus(row) {
			continue
		}
		if _, ok := sts[row.Dir]; ok {
			continue
		}
		if st, ok := s.cached(row, now); ok {
			sts[row.Dir] = st
			continue
		}
		late = append(late, row.Dir)
	}
	fresh := gather(ctx, v, late)
	for dir, st := range fresh {
		sts[dir] = st
	}
	s.keep(rows, sts, now)
	data := overviewData{}
	for _, row := range rows {
		st := statusOf{}
		if needsStatus(row) {
			st = sts[row.Dir]
		}
		data.Chambers = append(data.Chambers, newRow(row, st.st, st.err))
	}
	data.Count = countStates(data.Chambers)
	s.render(w, r, "overview", pageData{Title: "chambers", Page: "overview", Now: s.now(), Data: data})
}

func (s *Server) chamberPage(w http.ResponseWriter, r *http.Request) {
	session := 0
	if q := r.URL.Query().Get("session"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 {
			s.deny(w, r, http.StatusBadRequest, "session must be a number from 1", "")
			return
		}
		session = n
	}
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	defer v.close()
	ctx := r.Context()
	st, err := v.status(ctx, dir)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if session == 0 {
		session = st.Session
	}
	now := s.now()
	row := chamber.PsRow{Dir: dir, ID: chamberID(dir), State: st.State, Phase: st.Phase, Session: st.Session}
	data := chamberData{Row: newRow(row, st, nil), Status: st}
	// The rest is independent reads: at once.
	var wg sync.WaitGroup
	wg.Go(func() { data.History, data.HistoryErr = recentHistory(ctx, v, dir, now) })
	wg.Go(func() {
		if rep, err := v.validate(ctx, dir); err != nil {
			data.ReportErr = errText(err)
		} else {
			data.Report = rep
		}
	})
	wg.Go(func() {
		msgs, err := v.conversation(ctx, dir)
		if err != nil {
			data.MessagesErr = errText(err)
		}
		data.Messages = conversation(msgs)
		if n := len(data.Messages); n > maxMessages {
			data.Earlier, data.Messages = n-maxMessages, data.Messages[n-maxMessages:]
		}
	})
	wg.Go(func() { data.Block = readBlock(ctx, v, dir, session, st.Session) })
	wg.Go(func() { // spend.go
		if rows, err := v.history(ctx, dir, now.AddDate(0, 0, -spendDays-1), time.Time{}); err == nil {
			data.Spend = spendChart(rows, v.location(ctx, dir), now)
		}
	})
	wg.Go(func() { data.Diff = readDiff(ctx, v, dir, session) })
	wg.Go(func() {
		if d, err := chamber.ReadDocuments(ctx, v.with(io.Discard), dir); err == nil {
			data.Docs = d
		}
	})
	wg.Wait()
	s.render(w, r, "chamber", pageData{Title: filepath.Base(dir), Page: "chamber", ChamberID: chamberID(dir), Now: now, Data: data})
}

// recentHistory returns the latest maxHistory sessions, newest first, read from the end of the
// history index (a plan of years has tens of thousands of rows; the page shows maxHistory).
func recentHistory(ctx context.Context, v *view, dir string, _ time.Time) ([]chamber.HistoryRow, string) {
	hist, err := chamber.History(ctx, v.with(io.Discard), chamber.HistoryOptions{Dir: dir, Last: maxHistory})
	if err != nil {
		return nil, errText(err)
	}
	out := make([]chamber.HistoryRow, 0, len(hist))
	for i := len(hist) - 1; i >= 0; i-- {
		out = append(out, hist[i])
	}
	return out, ""
}

// readBlock reads one session's block through `log --session N`, keeping its last lines.
func readBlock(ctx context.Context, v *view, dir string, session, latest int) blockData {
	b := blockData{Session: session, Latest: latest, Prev: session - 1, Next: session + 1}
	if session >= latest {
		b.Next = 0
	}
	if session <= 0 {
		b.Err = "no session has run yet"
		return b
	}
	lw := &lineKeeper{max: maxBlockLines}
	if err := v.log(ctx, dir, session, false, lw); err != nil {
		b.Err = errText(err)
		return b
	}
	lw.flush()
	b.Skipped = lw.dropped
	for i, l := range lw.lines {
		b.Lines = append(b.Lines, classify(lw.first+i, l))
	}
	return b
}

// maxBlockLines bounds the lines of a block the page shows (the last ones): an agent that
// printed 500 MB must not make a page of 500 MB. `cryochamber log --session N` has them all.
const maxBlockLines = 2000

// lineKeeper keeps the last max lines written to it, and counts the others.
type lineKeeper struct {
	max     int
	lines   []string
	first   int // the number (from 1) of lines[0]
	dropped int
	part    []byte
}

func (k *lineKeeper) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			k.part = append(k.part, p...)
			break
		}
		k.add(string(append(k.part, p[:i]...)))
		k.part = k.part[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (k *lineKeeper) add(l string) {
	if k.first == 0 {
		k.first = 1
	}
	k.lines = append(k.lines, l)
	if len(k.lines) > k.max {
		// Drop in batches so that keeping the tail of a long block stays linear.
		cut := len(k.lines) - k.max + k.max/4
		k.lines = slices.Delete(k.lines, 0, cut)
		k.first += cut
		k.dropped += cut
	}
}

func (k *lineKeeper) flush() {
	if len(k.part) > 0 {
		k.add(string(k.part))
		k.part = nil
	}
}

// The JSON API. Each answer is what the CLI's --json prints, with the same field names.

func (s *Server) apiPs(w http.ResponseWriter, r *http.Request) {
	v := s.src.open()
	defer v.close()
	rows, err := v.ps(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.remember(rows)
	if rows == nil {
		rows = []chamber.PsRow{}
	}
	writeJSON(w, http.StatusOK, rows)
}

func (s *Server) apiStatus(w http.ResponseWriter, r *http.Request) {
	answerJSON(s, w, r, (*view).status)
}

func (s *Server) apiValidate(w http.ResponseWriter, r *http.Request) {
	answerJSON(s, w, r, (*view).validate)
}

// answerJSON answers a question about one chamber (the one the path names) as JSON.
func answerJSON[T any](s *Server, w http.ResponseWriter, r *http.Request, read func(*view, context.Context, string) (T, error)) {
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	defer v.close()
	res, err := read(v, r.Context(), dir)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) apiMessages(w http.ResponseWriter, r *http.Request) {
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	defer v.close()
	msgs, err := v.messages(r.Context(), dir)
	if err != nil && len(msgs) == 0 {
		s.fail(w, r, err)
		return
	}
	if msgs == nil {
		msgs = []chamber.ReceivedMessage{}
	}
	writeJSON(w, http.StatusOK, msgs)
}

// apiLog is `cryochamber log [--session N]` as text/plain (sanitized by the log reader).
func (s *Server) apiLog(w http.ResponseWriter, r *http.Request) {
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	defer v.close()
	session := 0
	if q := r.URL.Query().Get("session"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 {
			s.deny(w, r, http.StatusBadRequest, "session must be a number from 1", "")
			return
		}
		session = n
	}
	// Buffered up to a point so that an error before any output is still a proper answer.
	bw := &startWriter{w: w, limit: 64 << 10}
	err := v.log(r.Context(), dir, session, false, bw)
	if err != nil && !bw.started {
		s.fail(w, r, err)
		return
	}
	bw.finish()
	if err != nil {
		s.logf("log of %s: %v", dir, err)
	}
}

// startWriter holds the first bytes of an answer, so that an error that comes before them can
// still change the status code; past limit it streams.
type startWriter struct {
	w       http.ResponseWriter
	buf     bytes.Buffer
	limit   int
	started bool
}

func (b *startWriter) Write(p []byte) (int, error) {
	if b.started {
		return b.w.Write(p)
	}
	b.buf.Write(p)
	if b.buf.Len() >= b.limit {
		b.finish()
	}
	return len(p), nil
}

func (b *startWriter) finish() {
	if !b.started {
		b.started = true
		b.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		b.w.WriteHeader(http.StatusOK)
	}
	if b.buf.Len() > 0 {
		b.w.Write(b.buf.Bytes())
		b.buf.Reset()
	}
}

// apiHistory is `cryochamber history --json [--since T] [--until T]`, read as history reads
// them (chamber.ParseHistoryBound: a date is a whole day).
func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	defer v.close()
	var since, until time.Time
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"since", &since}, {"until", &until}} {
		q := r.URL.Query().Get(f.name)
		if q == "" {
			continue
		}
		t, err := chamber.ParseHistoryBound(q, v.location(r.Context(), dir), s.now(), f.name == "until")
		if err != nil {
			s.deny(w, r, http.StatusBadRequest, f.name+" "+err.Error(), chamber.HistoryRangeHint)
			return
		}
		*f.t = t
	}
	// A row at a time (issue 28): five years of hourly sessions are never held at once.
	out := &jsonStream{w: w}
	err := chamber.WriteHistoryJSON(r.Context(), v.with(io.Discard), chamber.HistoryOptions{Dir: dir, Since: since, Until: until}, out)
	if err != nil && !out.started {
		s.fail(w, r, err)
	}
}

// PauseRequest is the body of POST .../pause: the flag of `cryochamber pause`.
type PauseRequest struct {
	Until string `json:"until,omitempty"`
}

func (s *Server) apiPause(w http.ResponseWriter, r *http.Request) {
	var req PauseRequest
	s.act(w, r, &req, `pause {} or {"until": "2026-12-01 09:00"}`, func(ctx context.Context, dir string) (string, error) {
		return s.src.pause(ctx, dir, req.Until)
	})
}

func (s *Server) apiResume(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, &struct{}{}, "resume takes {}", s.src.resume)
}

func (s *Server) apiSend(w http.ResponseWriter, r *http.Request) {
	var req SendRequest
	s.act(w, r, &req, `send {"text": "...", "wake": true}`, func(ctx context.Context, dir string) (string, error) {
		return s.src.send(ctx, dir, req)
	})
}

func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, &struct{}{}, "cancel takes {}", s.src.cancel)
}

// act is every POST that changes a chamber the same way: decode the body (hint says what it
// takes), find the chamber, run the change through the chamber API, forget the chamber's
// cached status, and answer with what the CLI would have printed.
func (s *Server) act(w http.ResponseWriter, r *http.Request, body any, hint string, change func(ctx context.Context, dir string) (string, error)) {
	if err := readJSON(r, body); err != nil {
		s.deny(w, r, http.StatusBadRequest, err.Error(), hint)
		return
	}
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	defer v.close()
	out, err := change(r.Context(), dir)
	s.forget(dir)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, actionResult{OK: true, Output: out})
}

// actionResult is the answer of a POST: what the CLI printed.
type actionResult struct {
	OK     bool   `json:"ok"`
	Output string `json:"output"`
}

// wakeAnswerWait is how long POST .../wake waits for `wake --now` before answering that the
// session runs: a wake that has nothing to do, or a short session, answers with its output.
const wakeAnswerWait = 2 * time.Second

// WakeRequest is the body of POST .../wake: {} is `wake --now`; {"at": T} is `wake --at T`.
type WakeRequest struct {
	At string `json:"at,omitempty"`
}

// apiWake is `cryochamber wake --now` or `wake --at T`. A session woken now runs in this
// process (the chamber API has no call that hands it to the OS timer manager yet), so it is
// not tied to the request: it runs to its end, and the server does not exit while it runs.
func (s *Server) apiWake(w http.ResponseWriter, r *http.Request) {
	var req WakeRequest
	if err := readJSON(r, &req); err != nil {
		s.deny(w, r, http.StatusBadRequest, err.Error(), `wake {} (now) or {"at": "2026-12-01 09:00"}`)
		return
	}
	v, dir, ok := s.chamberFor(w, r)
	if !ok {
		return
	}
	if req.At != "" {
		defer v.close()
		out, err := s.src.wakeAt(r.Context(), dir, req.At)
		s.forget(dir)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, actionResult{OK: true, Output: out})
		return
	}
	v.close()
	s.wakeMu.Lock()
	if s.waking[dir] {
		s.wakeMu.Unlock()
		s.deny(w, r, http.StatusConflict, "a session started from the dashboard is still running for this chamber", "wait for it to end; the page shows its output")
		return
	}
	s.waking[dir] = true
	s.wakes.Add(1)
	s.wakeMu.Unlock()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		defer s.wakes.Done()
		err := s.src.wakeNow(context.WithoutCancel(r.Context()), dir, out)
		s.forget(dir)
		s.wakeMu.Lock()
		delete(s.waking, dir)
		s.wakeMu.Unlock()
		if err != nil {
			s.logf("wake --now of %s: %v", dir, err)
		}
		done <- err
	}()
	t := time.NewTimer(wakeAnswerWait)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, actionResult{OK: true, Output: strings.TrimSpace(out.String())})
	case <-t.C:
		writeJSON(w, http.StatusAccepted, actionResult{OK: true, Output: "a session is running (started from the dashboard); its output streams into the page"})
	}
}

// syncBuffer is a buffer that a running wake writes while a request may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// readJSON decodes one JSON object of the request body, refusing unknown fields (a typo in a
// field name must not silently send a message without its --wake).
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("the body is larger than %d bytes", mbe.Limit)
		}
		return fmt.Errorf("the body is not the expected JSON object: %v", err)
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// apiError is an error answer of the API, in the CLI's voice.
type apiError struct {
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
}

// deny answers with an error: JSON for the API, a page for a browser.
func (s *Server) deny(w http.ResponseWriter, r *http.Request, code int, msg, hint string) {
	if strings.HasPrefix(r.URL.Path, "/api/") || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		writeJSON(w, code, apiError{Error: msg, Hint: hint})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = s.pages["error"].ExecuteTemplate(w, "page", pageData{Title: http.StatusText(code), Page: "error", Now: s.now(), Data: errorData{Code: code, Msg: msg, Hint: hint}})
}

// fail answers with an error of the chamber package: its status says whose fault it was.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	hint := ""
	var ce *chamber.Error
	var cfg *chamber.ConfigError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ce):
		hint = ce.Hint
		if ce.Kind == chamber.Usage {
			code = http.StatusBadRequest
		} else {
			code = http.StatusConflict
		}
	case errors.As(err, &cfg):
		code, hint = http.StatusConflict, "fix cryo.toml"
	case errors.As(err, &mbe):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, context.Canceled):
		return // the client went away
	}
	s.deny(w, r, code, err.Error(), hint)
}

// render executes a page into a buffer first, so that a template error is a 500 and not half
// a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, p pageData) {
	p.Token = s.token
	var b bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&b, "page", p); err != nil {
		s.logf("render %s: %v", name, err)
		s.deny(w, r, http.StatusInternalServerError, "the page could not be rendered", "")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(neutralize(b.Bytes()))
	}
}
