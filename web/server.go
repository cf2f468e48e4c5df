package web

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a dashboard server.
type Options struct {
	Source *Source
	// Token is the secret every request must carry (LoadToken).
	Token string
	// Now is the clock (relative times on the pages, idle accounting).
	Now func() time.Time
	// Log receives the server's own messages (a session started from the page that failed,
	// a listener that broke); nil discards them.
	Log io.Writer
}

// Server is the dashboard: its pages, its JSON API and its event streams, behind the security
// rules of security.go.
type Server struct {
	src   *Source
	token string
	now   func() time.Time
	log   io.Writer
	pages map[string]*template.Template

	closing   chan struct{} // closed when the server shuts down: event streams end
	closeOnce sync.Once

	active atomic.Int64 // requests in progress (an open event stream counts)
	last   atomic.Int64 // UnixNano of the end of the last request

	wakeMu sync.Mutex
	waking map[string]bool // chambers with a session started from the page, still running
	wakes  sync.WaitGroup

	idMu sync.Mutex
	dirs map[string]string // chamber ID → directory, as `ps` last listed them

	statusMu  sync.Mutex
	statuses  map[string]cachedStatus // directory → the status the overview showed last
	statusTTL time.Duration
}

// New builds a server. It reads nothing until a request comes.
func New(o Options) (*Server, error) {
	if o.Source == nil || o.Now == nil {
		return nil, errors.New("web: a Source and a clock are needed")
	}
	if len(o.Token) < 32 {
		return nil, errors.New("web: the token is too short")
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	s := &Server{src: o.Source, token: o.Token, now: o.Now, log: o.Log, pages: pages,
		closing: make(chan struct{}), waking: map[string]bool{}, dirs: map[string]string{},
		statuses: map[string]cachedStatus{}, statusTTL: statusTTL}
	s.last.Store(o.Now().UnixNano())
	return s, nil
}

// Handler is the whole dashboard: routes behind the security rules.
func (s *Server) Handler() http.Handler {
	return s.secure(s.routes())
}

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.log, "cryochamber: web: "+format+"\n", args...)
}

// close ends the event streams (http.Server.Shutdown waits for handlers, and a stream never
// ends by itself).
func (s *Server) close() { s.closeOnce.Do(func() { close(s.closing) }) }

// track counts a request in progress, for the idle exit.
func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.active.Add(1)
		defer func() {
			s.last.Store(s.now().UnixNano())
			s.active.Add(-1)
		}()
		h.ServeHTTP(w, r)
	})
}

// idleFor reports how long nothing has happened: no request in progress, no session started
// from the page still running. 0 while something is.
func (s *Server) idleFor() time.Duration {
	if s.active.Load() > 0 {
		return 0
	}
	s.wakeMu.Lock()
	busy := len(s.waking) > 0
	s.wakeMu.Unlock()
	if busy {
		return 0
	}
	return s.now().Sub(time.Unix(0, s.last.Load()))
}

// ErrIdle is what Serve returns when it stopped because nobody used it for the idle time.
var ErrIdle = errors.New("idle")

// Serve answers on every listener until ctx ends or, with idle > 0, until nothing has happened
// for idle (then it returns ErrIdle: under socket activation the OS goes on listening and
// starts a new server at the next connection). It then stops accepting, ends the event
// streams, and waits for the sessions started from the page to finish.
func (s *Server) Serve(ctx context.Context, ls []net.Listener, idle time.Duration) error {
	if len(ls) == 0 {
		return errors.New("web: no listener")
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(s.log, "cryochamber: web: ", 0),
	}
	srv.RegisterOnShutdown(s.close)
	errc := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errc <- srv.Serve(l) }()
	}
	var tick <-chan time.Time
	if idle > 0 {
		every := min(max(idle/10, 50*time.Millisecond), 15*time.Second)
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	var stopErr error
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case err := <-errc:
			stopErr = fmt.Errorf("web: %w", err)
			break wait
		case <-tick:
			if s.idleFor() >= idle {
				stopErr = ErrIdle
				break wait
			}
		}
	}
	s.close()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		srv.Close()
	}
	s.wakeMu.Lock()
	n := len(s.waking)
	s.wakeMu.Unlock()
	if n > 0 {
		s.logf("waiting for %d session(s) started from the dashboard to finish", n)
	}
	s.wakes.Wait()
	return stopErr
}
