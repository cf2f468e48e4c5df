package fallback

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestValidMessageID(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{"abc.cryo-x-1234@example.com", true},
		{"CAF=x+y_z/1@mail.gmail.com", true},
		{"", false},
		{"no-at-sign", false},
		{"@example.com", false},
		{"a@", false},
		{"a@b@c", false},
		{"<a@b>", false},
		{"a b@c", false},
		{"a@b\r\nBcc: evil@example.com", false},
		{"a@b\nX: y", false},
		{"a\x00@b", false},
		{"a@[127.0.0.1]", false},
		{`"quoted"@b`, false},
		{".a@b", false},
		{"a..b@c", false},
		{"ä@b", false},
		{strings.Repeat("a", 250) + "@b", false},
	} {
		if got := ValidMessageID(tt.id); got != tt.want {
			t.Errorf("ValidMessageID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

// A mail of a thread arrives with its Message-ID, In-Reply-To, References and Auto-Submitted;
// a message identifier that could carry a header is refused before anything is sent.
func TestSendMailThreaded(t *testing.T) {
	srv := startAiosmtpd(t)
	cfg := EmailConfig{Host: srv.host, Port: srv.port, TLS: TLSNone, From: testFrom, Timeout: 20 * time.Second}
	m := Mail{
		Subject:       "Re: [cryo-garden-1234abcd] garden\r\nBcc: evil@example.com",
		Body:          "Reply from agent (session 2)\n\nyes\n",
		Date:          time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		MessageID:     "0011223344556677.cryo-garden-1234abcd@example.com",
		InReplyTo:     "CAFtheirs@mail.example.com",
		References:    []string{"root.cryo-garden-1234abcd@example.com", "CAFtheirs@mail.example.com"},
		AutoSubmitted: "auto-replied",
	}
	if err := SendMail(context.Background(), cfg, testTo, m); err != nil {
		t.Fatal(err)
	}
	msgs := srv.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("%d messages received, want 1", len(msgs))
	}
	h := msgs[0].header
	for k, want := range map[string]string{
		"Message-Id":     "<0011223344556677.cryo-garden-1234abcd@example.com>",
		"In-Reply-To":    "<CAFtheirs@mail.example.com>",
		"References":     "<root.cryo-garden-1234abcd@example.com> <CAFtheirs@mail.example.com>",
		"Auto-Submitted": "auto-replied",
		"Subject":        "Re: [cryo-garden-1234abcd] garden Bcc: evil@example.com",
	} {
		if got := decodeHeader(t, h.Get(k)); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if _, ok := h["Bcc"]; ok {
		t.Error("a Bcc header arrived")
	}
	if !strings.Contains(msgs[0].body, "yes") {
		t.Errorf("body = %q", msgs[0].body)
	}

	for _, bad := range []Mail{
		{Subject: "x", Body: "x", MessageID: "a@b\r\nBcc: evil@example.com"},
		{Subject: "x", Body: "x", InReplyTo: "a@b>\r\nBcc: <evil@example.com"},
		{Subject: "x", Body: "x", References: []string{"ok@b", "x y@z"}},
		{Subject: "x", Body: "x", AutoSubmitted: "no\r\nBcc: evil@example.com"},
	} {
		if err := SendMail(context.Background(), cfg, testTo, bad); err == nil {
			t.Errorf("SendMail(%+v) = nil, want a refusal", bad)
		}
	}
	if n := len(srv.messages(t)); n != 1 {
		t.Errorf("%d messages received after the refusals, want still 1", n)
	}
}
