// Package hctest is a stand-in for healthchecks.io on 127.0.0.1, for tests: the monitor cannot
// run here, so this replays its documented answers (docs "Pinging API" and "Management API
// v3": the ping endpoints answer 200 "OK" and 404 "not found"; the API answers 401
// {"error": "missing api key"} / {"error": "wrong api key"}, 404 for an unknown check, 400
// {"error": "json validation error: timeout is too small"} for a value outside 60 s to a year,
// and the check's JSON otherwise) and keeps a check's state the way the service computes it:
// a success ping makes it up and starts the timeout from that ping, a /fail ping makes it down,
// a /start ping that is not followed by an end within grace makes it down, and a check whose
// last ping is older than timeout is in grace, then down after grace more. Pause holds it
// paused until the next ping.
//
// The clock is the caller's: StatusAt and DownAt take a time, so a test asks "what does the
// monitor say at the next wake plus grace" without waiting for it.
package hctest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Event is one request the stand-in received, in order.
type Event struct {
	Kind string // "start", "success", "fail" (pings); "update", "pause", "get" (API)
	Body string // the ping's body, or the API request's JSON
	At   time.Time
}

// Server is one check on a stand-in monitor.
type Server struct {
	URL     string // the site root (api_url)
	PingURL string // the check's ping URL
	UUID    string
	Key     string

	// Now is the stand-in's clock for requests (default time.Now).
	Now func() time.Time

	mu        sync.Mutex
	events    []Event
	status    string // new, up, down, paused
	timeout   int
	grace     int
	lastPing  *time.Time
	lastStart *time.Time
	nPings    int
	srv       *httptest.Server
}

// Start starts the stand-in with one check (timeout one day, grace one hour, as the service
// creates a check) and ends it with the test.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{UUID: "5bd2a5d5-2f5d-4bd3-8d4e-8a2a7ed1c9c4", Key: "rw-test-key-0123456789", status: "new", timeout: 86400, grace: 3600, Now: time.Now}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	s.PingURL = s.srv.URL + "/ping/" + s.UUID
	t.Cleanup(func() {
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

// Close stops the stand-in now (a monitor that cannot be reached).
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Events is what arrived so far, in order.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// Kinds is the kinds of Events, in order.
func (s *Server) Kinds() []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Kind)
	}
	return out
}

// Timeout and Grace are what the check holds (seconds).
func (s *Server) Timeout() (timeout, grace int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeout, s.grace
}

// LastPing is the time of the last success or fail ping (nil: none).
func (s *Server) LastPing() *time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastPing
}

// StatusAt is the check's status at now, as the service computes it: new, paused, up,
// started, grace or down.
func (s *Server) StatusAt(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusAt(now)
}

func (s *Server) statusAt(now time.Time) string {
	switch s.status {
	case "new", "paused":
		if s.lastStart != nil && s.status == "new" {
			return "started"
		}
		return s.status
	}
	if s.lastStart != nil && !now.Before(s.lastStart.Add(time.Duration(s.grace)*time.Second)) {
		return "down" // started, and no end within grace
	}
	if s.status == "down" {
		return "down"
	}
	if s.lastPing != nil {
		due := s.lastPing.Add(time.Duration(s.timeout) * time.Second)
		if !now.Before(due.Add(time.Duration(s.grace) * time.Second)) {
			return "down"
		}
		if !now.Before(due) {
			return "grace"
		}
	}
	if s.lastStart != nil {
		return "started"
	}
	return s.status
}

// DownAt is when the check goes down if no ping comes (nil: it does not, being new, paused
// or down already).
func (s *Server) DownAt() *time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != "up" || s.lastPing == nil {
		return nil
	}
	t := s.lastPing.Add(time.Duration(s.timeout+s.grace) * time.Second)
	if s.lastStart != nil {
		if st := s.lastStart.Add(time.Duration(s.grace) * time.Second); st.Before(t) {
			t = st
		}
	}
	return &t
}

func (s *Server) record(kind, body string) {
	s.events = append(s.events, Event{Kind: kind, Body: body, At: s.Now()})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 100_000))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now()
	if rest, ok := strings.CutPrefix(r.URL.Path, "/ping/"); ok {
		uuid, action, _ := strings.Cut(rest, "/")
		if uuid != s.UUID || (action != "" && action != "start" && action != "fail") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		switch action {
		case "start":
			t := now
			s.lastStart = &t
			s.record("start", string(body))
		default:
			t := now
			s.lastPing, s.lastStart = &t, nil
			s.status = "up"
			kind := "success"
			if action == "fail" {
				s.status, kind = "down", "fail"
			}
			s.record(kind, string(body))
		}
		s.nPings++
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "OK")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v3/checks/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	key := r.Header.Get("X-Api-Key")
	switch {
	case key == "":
		apiError(w, http.StatusUnauthorized, "missing api key")
		return
	case key != s.Key:
		apiError(w, http.StatusUnauthorized, "wrong api key")
		return
	}
	uuid, action, _ := strings.Cut(rest, "/")
	if uuid != s.UUID {
		apiError(w, http.StatusNotFound, "not found")
		return
	}
	switch {
	case action == "" && r.Method == http.MethodGet:
		s.record("get", "")
	case action == "" && r.Method == http.MethodPost:
		var in map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			apiError(w, http.StatusBadRequest, "could not parse request body")
			return
		}
		for _, k := range []string{"timeout", "grace"} {
			v, ok := in[k]
			if !ok {
				continue
			}
			f, isNum := v.(float64)
			switch {
			case !isNum || f != float64(int(f)):
				apiError(w, http.StatusBadRequest, "json validation error: "+k+" is not a number")
				return
			case f < 60:
				apiError(w, http.StatusBadRequest, "json validation error: "+k+" is too small")
				return
			case f > 31536000:
				apiError(w, http.StatusBadRequest, "json validation error: "+k+" is too large")
				return
			}
		}
		if v, ok := in["timeout"].(float64); ok {
			s.timeout = int(v)
		}
		if v, ok := in["grace"].(float64); ok {
			s.grace = int(v)
		}
		s.record("update", string(body))
	case action == "pause" && r.Method == http.MethodPost:
		s.status, s.lastStart = "paused", nil
		s.record("pause", "")
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.checkJSON(now))
}

func apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// checkJSON is the check as the API v3 shows it to a read-write key.
func (s *Server) checkJSON(now time.Time) map[string]any {
	ts := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.UTC().Format("2006-01-02T15:04:05+00:00")
	}
	var next *time.Time
	if s.lastPing != nil && s.status != "paused" {
		t := s.lastPing.Add(time.Duration(s.timeout) * time.Second)
		next = &t
	}
	return map[string]any{
		"name": "cryochamber", "slug": "cryochamber", "tags": "", "desc": "",
		"grace": s.grace, "n_pings": s.nPings, "status": s.statusAt(now), "started": s.lastStart != nil,
		"last_ping": ts(s.lastPing), "next_ping": ts(next), "manual_resume": false, "methods": "",
		"subject": "", "subject_fail": "", "start_kw": "", "success_kw": "", "failure_kw": "",
		"filter_subject": false, "filter_body": false, "uuid": s.UUID,
		"ping_url":   s.PingURL,
		"update_url": fmt.Sprintf("%s/api/v3/checks/%s", s.URL, s.UUID),
		"pause_url":  fmt.Sprintf("%s/api/v3/checks/%s/pause", s.URL, s.UUID),
		"resume_url": fmt.Sprintf("%s/api/v3/checks/%s/resume", s.URL, s.UUID),
		"channels":   "", "timeout": s.timeout,
	}
}
