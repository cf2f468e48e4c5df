package heartbeat_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/heartbeat"
	"github.com/cryochamber/cryochamber/internal/heartbeat/hctest"
)

func TestPingsAndTimeoutAgainstTheStandIn(t *testing.T) {
	hc := hctest.Start(t)
	c := &heartbeat.Client{}
	ctx := context.Background()
	api := heartbeat.API{URL: hc.URL, Key: hc.Key, Check: hc.UUID}
	if err := c.Ping(ctx, hc.PingURL, heartbeat.Start, "session 1 started"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx, hc.PingURL, heartbeat.Fail, "session 1: failed (crashed)\nsecond line\x1b[31m"); err != nil {
		t.Fatal(err)
	}
	ch, err := c.SetTimeout(ctx, api, 5, 3600) // below the API's minimum: sent as 60
	if err != nil || ch.Timeout != 60 || ch.Grace != 3600 || ch.Status != "down" {
		t.Fatalf("SetTimeout: %+v, %v", ch, err)
	}
	if _, err := c.Pause(ctx, api); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, api)
	if err != nil || got.Status != "paused" {
		t.Fatalf("Get after pause: %+v, %v", got, err)
	}
	if want := []string{"start", "fail", "update", "pause", "get"}; !slices.Equal(hc.Kinds(), want) {
		t.Fatalf("events %v, want %v", hc.Kinds(), want)
	}
	if b := hc.Events()[1].Body; b != "session 1: failed (crashed) second line [31m" {
		t.Fatalf("the /fail body is not one line of text: %q", b)
	}
}

func TestWrongKeyIsFinalAndNamed(t *testing.T) {
	hc := hctest.Start(t)
	c := &heartbeat.Client{}
	_, err := c.SetTimeout(context.Background(), heartbeat.API{URL: hc.URL, Key: "nope", Check: hc.UUID}, 3600, 60)
	var se *heartbeat.StatusError
	if !errors.As(err, &se) || se.Code != 401 || se.Text != "wrong api key" {
		t.Fatalf("err = %v; want the monitor's 401 wrong api key", err)
	}
	_, err = c.Get(context.Background(), heartbeat.API{URL: hc.URL, Key: hc.Key, Check: "00000000-0000-0000-0000-000000000000"})
	if !errors.As(err, &se) || se.Code != 404 {
		t.Fatalf("unknown check: %v", err)
	}
	if len(hc.Events()) != 0 {
		t.Fatalf("a refused request changed the check: %v", hc.Kinds())
	}
}

func TestServerErrorIsRetried(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("OK"))
	}))
	defer srv.Close()
	if err := (&heartbeat.Client{}).Ping(context.Background(), srv.URL+"/ping/x", heartbeat.Success, "ok"); err != nil || n.Load() != 3 {
		t.Fatalf("err %v after %d attempts; want success at the third", err, n.Load())
	}
}

// A monitor that hangs costs at most the deadline, and the error never shows the ping URL.
func TestHangingMonitorIsBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := &heartbeat.Client{Deadline: 300 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- c.Ping(context.Background(), srv.URL+"/ping/secret-uuid", heartbeat.Start, "") }()
	select {
	case err := <-done:
		if err == nil || strings.Contains(err.Error(), "secret-uuid") {
			t.Fatalf("err = %v; want a deadline error without the URL", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ping did not give up at its deadline")
	}
}

func TestCheckURL(t *testing.T) {
	for _, bad := range []string{"ftp://x/y", "https://user:pw@hc-ping.com/x", "hc-ping.com/x", "https://hc-ping.com/x?y=1"} {
		if heartbeat.CheckURL(bad) == nil {
			t.Errorf("CheckURL(%q) accepted it", bad)
		}
	}
	if err := heartbeat.CheckURL("https://hc-ping.com/5bd2a5d5-2f5d-4bd3-8d4e-8a2a7ed1c9c4"); err != nil {
		t.Error(err)
	}
}
