package web_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/web"
)

// serveResult runs Serve in the background.
func serveResult(ctx context.Context, srv *web.Server, ls []net.Listener, idle time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ls, idle) }()
	return done
}

// TestServeIdleAndShutdown: under socket activation the server exits when nobody has used it
// for the idle time, but never while a page holds an event stream open; Ctrl-C ends it at
// once, open streams included. Both its TCP and its Unix socket need the token.
func TestServeIdleAndShutdown(t *testing.T) {
	f := newFixture(t, map[string]string{"alpha": replyAgent})
	listen := func() []net.Listener {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		unix, err := net.Listen("unix", filepath.Join(t.TempDir(), "web.sock"))
		if err != nil {
			t.Fatal(err)
		}
		return []net.Listener{tcp, unix}
	}
	newServer := func() *web.Server {
		srv, err := web.New(web.Options{Source: f.src, Token: f.token, Now: time.Now, Log: testLog{t}})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}

	t.Run("idle exit", func(t *testing.T) {
		ls := listen()
		done := serveResult(context.Background(), newServer(), ls, 300*time.Millisecond)
		select {
		case err := <-done:
			if !errors.Is(err, web.ErrIdle) {
				t.Fatalf("Serve returned %v, want ErrIdle", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the server did not exit when idle")
		}
		if c, err := net.Dial("tcp", ls[0].Addr().String()); err == nil {
			c.Close()
			t.Fatal("the listener still accepts after the idle exit")
		}
	})

	t.Run("an open page keeps it", func(t *testing.T) {
		ls := listen()
		done := serveResult(context.Background(), newServer(), ls, 300*time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		r, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ls[0].Addr().String()+"/api/chambers/"+f.id("alpha")+"/events", nil)
		r.Header.Set(web.TokenHeader, f.token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("event stream: %v %v", resp, err)
		}
		select {
		case err := <-done:
			t.Fatalf("the server exited (%v) while a page held a stream open", err)
		case <-time.After(2 * time.Second):
		}
		cancel()
		resp.Body.Close()
		select {
		case err := <-done:
			if !errors.Is(err, web.ErrIdle) {
				t.Fatalf("Serve returned %v, want ErrIdle", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the server did not exit once the page was closed")
		}
	})

	t.Run("interrupt ends open streams", func(t *testing.T) {
		ls := listen()
		ctx, stop := context.WithCancel(context.Background())
		done := serveResult(ctx, newServer(), ls, 0)
		unix := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", ls[1].Addr().String())
		}}}
		// Over the Unix socket: no Host check, but the token all the same.
		for tok, want := range map[string]int{"": 401, f.token: 200} {
			r, _ := http.NewRequest("GET", "http://dashboard/api/ps", nil)
			if tok != "" {
				r.Header.Set(web.TokenHeader, tok)
			}
			resp, err := unix.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("over the Unix socket with token %q: %d, want %d", tok, resp.StatusCode, want)
			}
		}
		r, _ := http.NewRequest("GET", "http://dashboard/api/events", nil)
		r.Header.Set(web.TokenHeader, f.token)
		resp, err := unix.Do(r)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("event stream over the Unix socket: %v %v", resp, err)
		}
		defer resp.Body.Close()
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve returned %v after an interrupt", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not stop with a stream open")
		}
		buf := make([]byte, 4096)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				if !strings.Contains(err.Error(), "EOF") {
					t.Logf("stream ended with %v", err)
				}
				break
			}
		}
	})
}
