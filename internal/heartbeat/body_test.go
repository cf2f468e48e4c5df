package heartbeat_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cryochamber/cryochamber/internal/heartbeat"
	"github.com/cryochamber/cryochamber/internal/heartbeat/hctest"
)

// TestPingBodyUnsafeRunes: the body of a ping carries the agent's summary; what the monitor
// shows (its web page, its e-mail and chat notices) gets one line of plain text: no C1 control
// (U+009B is a CSI), no bidirectional override, no line separator, no invalid UTF-8, and at
// most 1000 bytes.
func TestPingBodyUnsafeRunes(t *testing.T) {
	hc := hctest.Start(t)
	c := &heartbeat.Client{}
	body := "session 2: EXIT 2: \u009b31mred\u202eevil\u2028second\u0085third\xff" + strings.Repeat("é", 900)
	if err := c.Ping(context.Background(), hc.PingURL, heartbeat.Fail, body); err != nil {
		t.Fatal(err)
	}
	b := hc.Events()[0].Body
	for _, bad := range []string{"\u009b", "\u202e", "\u2028", "\u0085"} {
		if strings.Contains(b, bad) {
			t.Errorf("the body holds %q: %q", bad, b[:80])
		}
	}
	if !utf8.ValidString(b) || len(b) > 1000 || !strings.HasPrefix(b, "session 2: EXIT 2: 31mred evil second third") {
		t.Errorf("the body: %d bytes, %q", len(b), b[:min(len(b), 80)])
	}
}
