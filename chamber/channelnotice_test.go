package chamber

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The notice sync gives when max_per_day bites reaches the operator's own targets (here a
// webhook on 127.0.0.1) and the outbox, from the chamber's accepted configuration, while a
// session holds the lock (one way for every channel notice: Sync.Notice, which takes no lock).
func TestChannelNoticeReachesTheOperator(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	toml := "agent = \"/bin/true\"\n[[fallback]]\naction = \"webhook\"\ntarget = \"" + srv.URL + "/hook\"\n"
	r := testRunner(t, toml, t0)
	if err := r.accept([]byte(toml)); err != nil {
		t.Fatal(err)
	}
	r.st.Phase = PhaseComplete
	r.st.Chamber, r.st.ID = r.dir, r.id
	if err := r.save(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{inboxDir, archiveDir, outboxDir} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A session holds the lock meanwhile (for hours, perhaps): the notice does not wait for it.
	lock, err := r.store.tryLock()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	s, err := OpenSync(r.env, r.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Notice(context.Background(), "channel-cap", "github published 100 items in the last 24 hours, its max_per_day"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0]["reason"] != "channel-cap" || !strings.Contains(got[0]["text"].(string), "max_per_day") {
		t.Fatalf("the webhook received %v", got)
	}
	ents, _ := os.ReadDir(filepath.Join(r.dir, outboxDir))
	if len(ents) != 1 {
		t.Fatalf("the outbox holds %d items, want the notice's copy", len(ents))
	}
}
