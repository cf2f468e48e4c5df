package web_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// A chamber that refused to hibernate (failed) alerted: the overview's alerts column says so,
// and its page offers what works on it ("start again", Cancel) rather than Wake, Move and
// Pause, which answer 409.
func TestDashboardFailedChamber(t *testing.T) {
	agent := `#!/bin/sh
echo '[CRYO:EXIT 0] done'
if [ -f fail ]; then echo '[CRYO:WAKE 1990-01-01T00:00]'; else echo '[CRYO:WAKE +1h]'; fi
`
	f := newFixture(t, map[string]string{"broken": agent})
	dir := f.dirs["broken"]
	writeFile(t, filepath.Join(dir, "fail"), "", 0o644)
	f.cryo(1, "wake", "--now", "--dir", dir)
	if st := f.statusOf("broken"); st.State != "failed" || st.LastAlert == nil {
		t.Fatalf("the chamber is %s, last alert %v", st.State, st.LastAlert)
	}

	code, body := f.get("/")
	if code != 200 {
		t.Fatalf("overview: %d", code)
	}
	row := body[strings.Index(body, `data-id="`+f.id("broken")+`"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, "refused") || strings.Contains(row, `<span class="muted">0</span>`) {
		t.Errorf("the overview's alerts column hides the alert:\n%s", row)
	}

	code, body = f.get("/c/" + f.id("broken"))
	if code != 200 {
		t.Fatalf("chamber page: %d", code)
	}
	for _, gone := range []string{`data-action="wake"`, `data-action="ask" data-target="move-form"`, `data-action="ask" data-target="pause-form"`} {
		if strings.Contains(body, gone) {
			t.Errorf("a failed chamber's page offers %s", gone)
		}
	}
	if !strings.Contains(body, "start again") || !strings.Contains(body, "cryochamber start --dir "+dir) || !strings.Contains(body, `data-target="cancel-confirm"`) {
		t.Errorf("a failed chamber's page does not say how to start it again (cryochamber start --dir %s)", dir)
	}
}
