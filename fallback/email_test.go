package fallback

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/mailtest"
	"github.com/wneessen/go-mail/smtp"
)

const (
	testFrom = "cryochamber@example.org"
	testTo   = "ops@example.com"
)

var testAlert = Alert{
	Chamber: "/home/ada/plans/thesis",
	Session: 12,
	Reason:  "timeout",
	Message: "The session ran past session_timeout (2h) and was killed.\nNext: retry at +5m.",
	Time:    time.Date(2026, 11, 22, 10, 4, 51, 0, time.UTC),
}

// checkReceived compares a message as the real server stored it with what SendEmail was asked.
func checkReceived(t *testing.T, got received, a Alert) {
	t.Helper()
	h := got.header
	if v := h.Get("From"); v != "<"+testFrom+">" && v != testFrom {
		t.Errorf("From = %q, want %s", v, testFrom)
	}
	if v := h.Get("To"); v != "<"+testTo+">" && v != testTo {
		t.Errorf("To = %q, want %s", v, testTo)
	}
	if v := h.Get("X-RcptTo"); v != testTo {
		t.Errorf("envelope recipients (X-RcptTo) = %q, want only %s", v, testTo)
	}
	if v := h.Get("X-MailFrom"); v != testFrom {
		t.Errorf("envelope sender (X-MailFrom) = %q, want %s", v, testFrom)
	}
	if v := decodeHeader(t, h.Get("Subject")); v != Subject(a) {
		t.Errorf("Subject = %q, want %q", v, Subject(a))
	}
	if v := h.Get("Auto-Submitted"); v != "auto-generated" {
		t.Errorf("Auto-Submitted = %q, want auto-generated", v)
	}
	if v := h.Get("User-Agent"); v != "cryochamber" {
		t.Errorf("User-Agent = %q, want cryochamber", v)
	}
	if !a.Time.IsZero() {
		d, err := h.Date()
		if err != nil || !d.Equal(a.Time) {
			t.Errorf("Date = %q (%v), want %v", h.Get("Date"), err, a.Time)
		}
	}
	if strings.TrimRight(got.body, "\n") != strings.TrimRight(Body(a), "\n") {
		t.Errorf("body =\n%s\nwant\n%s", got.body, Body(a))
	}
	for _, k := range []string{"Bcc", "Cc", "Reply-To"} {
		if v, ok := h[k]; ok {
			t.Errorf("unexpected %s header %q", k, v)
		}
	}
}

func TestSendEmailReceived(t *testing.T) {
	pki := newPKI(t)
	tests := []struct {
		name   string
		server func(t *testing.T) *smtpd
		cfg    EmailConfig
	}{
		{
			name:   "no TLS",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t) },
			cfg:    EmailConfig{TLS: TLSNone},
		},
		{
			name:   "opportunistic STARTTLS, server without TLS: sent in clear",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t) },
			cfg:    EmailConfig{TLS: TLSStartTLS},
		},
		{
			// aiosmtpd with a certificate refuses MAIL before STARTTLS: delivery proves TLS.
			name:   "opportunistic STARTTLS, server with TLS",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t, pki.startTLSFlags()...) },
			cfg:    EmailConfig{TLS: TLSStartTLS, RootCAs: pki.pool},
		},
		{
			name:   "mandatory STARTTLS",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t, pki.startTLSFlags()...) },
			cfg:    EmailConfig{TLS: TLSStartTLSRequired, RootCAs: pki.pool},
		},
		{
			name:   "default policy is mandatory STARTTLS",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t, pki.startTLSFlags()...) },
			cfg:    EmailConfig{RootCAs: pki.pool},
		},
		{
			name:   "implicit TLS",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t, pki.smtpsFlags()...) },
			cfg:    EmailConfig{TLS: TLSImplicit, RootCAs: pki.pool},
		},
		{
			// The server requires AUTH: delivery proves we authenticated.
			name:   "AUTH PLAIN without TLS to loopback",
			server: func(t *testing.T) *smtpd { return startAuthServer(t, "--auth-in-clear") },
			cfg:    EmailConfig{TLS: TLSNone, Username: authUser, Password: authPassword},
		},
		{
			name:   "AUTH LOGIN when PLAIN is not offered",
			server: func(t *testing.T) *smtpd { return startAuthServer(t, "--auth-in-clear", "--exclude-mech", "PLAIN") },
			cfg:    EmailConfig{TLS: TLSNone, Username: authUser, Password: authPassword},
		},
		{
			name: "AUTH after mandatory STARTTLS",
			server: func(t *testing.T) *smtpd {
				return startAuthServer(t, "--tlscert", pki.certFile, "--tlskey", pki.keyFile)
			},
			cfg: EmailConfig{TLS: TLSStartTLSRequired, RootCAs: pki.pool, Username: authUser, Password: authPassword},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.server(t)
			cfg := tt.cfg
			cfg.Host, cfg.Port, cfg.From, cfg.Timeout = srv.host, srv.port, testFrom, 20*time.Second
			if err := SendEmail(context.Background(), cfg, testTo, testAlert); err != nil {
				t.Fatalf("SendEmail: %v", err)
			}
			msgs := srv.messages(t)
			if len(msgs) != 1 {
				t.Fatalf("server received %d messages, want 1", len(msgs))
			}
			checkReceived(t, msgs[0], testAlert)
		})
	}
}

func TestSendEmailFails(t *testing.T) {
	pki := newPKI(t)
	tests := []struct {
		name   string
		server func(t *testing.T) *smtpd
		cfg    EmailConfig
		phase  string
		want   []string
	}{
		{
			name:   "mandatory STARTTLS, server without TLS",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t) },
			cfg:    EmailConfig{TLS: TLSStartTLSRequired, RootCAs: pki.pool},
			phase:  PhaseTLS,
			want:   []string{"does not support STARTTLS"},
		},
		{
			name:   "implicit TLS, server without TLS",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t) },
			cfg:    EmailConfig{TLS: TLSImplicit, RootCAs: pki.pool},
			phase:  PhaseTLS,
			want:   []string{"tls:"},
		},
		{
			name:   "STARTTLS with a certificate we do not trust",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t, pki.startTLSFlags()...) },
			cfg:    EmailConfig{TLS: TLSStartTLS, RootCAs: x509.NewCertPool()},
			phase:  PhaseTLS,
			want:   []string{"certificate"},
		},
		{
			name:   "implicit TLS with a certificate we do not trust",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t, pki.smtpsFlags()...) },
			cfg:    EmailConfig{TLS: TLSImplicit, RootCAs: x509.NewCertPool()},
			phase:  PhaseTLS,
			want:   []string{"certificate"},
		},
		{
			name:   "wrong password",
			server: func(t *testing.T) *smtpd { return startAuthServer(t, "--auth-in-clear") },
			cfg:    EmailConfig{TLS: TLSNone, Username: authUser, Password: "wrong-" + authPassword},
			phase:  PhaseAuth,
			want:   []string{"535"},
		},
		{
			name:   "wrong user",
			server: func(t *testing.T) *smtpd { return startAuthServer(t, "--auth-in-clear") },
			cfg:    EmailConfig{TLS: TLSNone, Username: "mallory", Password: authPassword},
			phase:  PhaseAuth,
			want:   []string{"535"},
		},
		{
			name:   "username but the server offers no AUTH",
			server: func(t *testing.T) *smtpd { return startAiosmtpd(t) },
			cfg:    EmailConfig{TLS: TLSNone, Username: authUser, Password: authPassword},
			phase:  PhaseAuth,
			want:   []string{"offers no AUTH"},
		},
		{
			name:   "server requires AUTH and we have no username",
			server: func(t *testing.T) *smtpd { return startAuthServer(t, "--auth-in-clear") },
			cfg:    EmailConfig{TLS: TLSNone},
			phase:  PhaseSend,
			want:   []string{"530"},
		},
		{
			name: "nothing listens",
			server: func(t *testing.T) *smtpd {
				return &smtpd{host: "127.0.0.1", port: mailtest.FreePort(t), maildir: t.TempDir()}
			},
			cfg:   EmailConfig{TLS: TLSNone},
			phase: PhaseDial,
			want:  []string{"refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.server(t)
			cfg := tt.cfg
			cfg.Host, cfg.Port, cfg.From, cfg.Timeout = srv.host, srv.port, testFrom, 20*time.Second
			err := SendEmail(context.Background(), cfg, testTo, testAlert)
			if err == nil {
				t.Fatal("SendEmail succeeded, want an error")
			}
			var ee *EmailError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T) is not an *EmailError", err, err)
			}
			if ee.Phase != tt.phase {
				t.Errorf("phase = %q, want %q (error: %v)", ee.Phase, tt.phase, err)
			}
			msg := err.Error()
			for _, w := range append(tt.want, srv.addr(), ": "+tt.phase+": ", testTo) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if cfg.Password != "" {
				for _, secret := range []string{cfg.Password, base64.StdEncoding.EncodeToString([]byte(cfg.Password))} {
					if strings.Contains(msg, secret) {
						t.Errorf("error %q contains the password", msg)
					}
				}
			}
			if n := len(srv.messages(t)); n != 0 {
				t.Errorf("server received %d messages, want none", n)
			}
		})
	}
}

// TestSendEmailHeaderInjection proves on the real server that CR/LF in alert text that came
// from markers adds no header and no recipient.
func TestSendEmailHeaderInjection(t *testing.T) {
	srv := startAiosmtpd(t)
	const evil = "evil@attacker.example"
	a := Alert{
		Chamber: "/tmp/plan\r\nBcc: " + evil,
		Session: 3,
		Reason:  "failure\r\nBcc: " + evil + "\r\nX-Injected: yes",
		Message: "done\r\nBcc: " + evil + "\r\n\r\nCc: " + evil + "\n.\nRCPT TO:<" + evil + ">",
		Time:    testAlert.Time,
	}
	cfg := EmailConfig{Host: srv.host, Port: srv.port, TLS: TLSNone, From: testFrom, Timeout: 20 * time.Second}
	if err := SendEmail(context.Background(), cfg, testTo, a); err != nil {
		t.Fatalf("SendEmail: %v", err)
	}
	msgs := srv.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("server received %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	checkReceived(t, m, a)
	if _, ok := m.header["X-Injected"]; ok {
		t.Error("an X-Injected header arrived")
	}
	if want := "cryochamber: plan Bcc: " + evil + ": failure Bcc: " + evil + " X-Injected: yes (session 3)"; decodeHeader(t, m.header.Get("Subject")) != want {
		t.Errorf("Subject = %q, want %q", decodeHeader(t, m.header.Get("Subject")), want)
	}
	// The Maildir file has the header as received, with \n line ends.
	head, _, _ := strings.Cut(strings.ReplaceAll(m.raw, "\r\n", "\n"), "\n\n")
	if h := "\n" + strings.ToLower(head); strings.Contains(h, "\nbcc:") || strings.Contains(h, "\ncc:") {
		t.Errorf("a Bcc or Cc line is in the header:\n%s", head)
	}
}

// hangingServer accepts connections and never says anything.
func hangingServer(t *testing.T) (addr *net.TCPAddr, accepted <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			ch <- struct{}{}
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().(*net.TCPAddr), ch
}

func TestSendEmailContext(t *testing.T) {
	t.Run("cancelled before", func(t *testing.T) {
		addr, accepted := hangingServer(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		cfg := EmailConfig{Host: "127.0.0.1", Port: addr.Port, TLS: TLSNone, From: testFrom}
		err := SendEmail(ctx, cfg, testTo, testAlert)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		select {
		case <-accepted:
			t.Error("SendEmail connected although its context was already cancelled")
		default:
		}
	})
	t.Run("cancelled while the server hangs", func(t *testing.T) {
		addr, accepted := hangingServer(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { <-accepted; cancel() }()
		// A long timeout: only the cancellation can end this delivery in time for the test.
		cfg := EmailConfig{Host: "127.0.0.1", Port: addr.Port, TLS: TLSNone, From: testFrom, Timeout: time.Hour}
		err := SendEmail(ctx, cfg, testTo, testAlert)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
		if !strings.Contains(err.Error(), ": dial: ") {
			t.Errorf("error %q does not name the dial phase", err)
		}
	})
	t.Run("timeout while the server hangs", func(t *testing.T) {
		addr, _ := hangingServer(t)
		cfg := EmailConfig{Host: "127.0.0.1", Port: addr.Port, TLS: TLSNone, From: testFrom, Timeout: 200 * time.Millisecond}
		err := SendEmail(context.Background(), cfg, testTo, testAlert)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("error = %v, want a deadline error", err)
		}
		var ee *EmailError
		if !errors.As(err, &ee) || ee.Phase != PhaseDial {
			t.Errorf("error %v does not name the dial phase", err)
		}
	})
}

func TestCheckRecipient(t *testing.T) {
	tests := []struct {
		to   string
		want string // "" = accepted
	}{
		{to: "ops@example.com"},
		{to: "first.last+cryo@sub.example.co.uk"},
		{to: "", want: "empty"},
		{to: "Ops <ops@example.com>", want: "display name"},
		{to: "<ops@example.com>", want: "bare address"},
		{to: "ops@example.com (Ops)", want: "bare address"},
		{to: "ops@example.com, boss@example.com", want: "not one email address"},
		{to: "ops@example.com; boss@example.com", want: "not one email address"},
		{to: "team: ops@example.com, boss@example.com;", want: "not one email address"},
		{to: "undisclosed-recipients:;", want: "not one email address"},
		{to: "ops", want: "not one email address"},
		{to: "ops@example.com\r\nBcc: evil@x.example", want: "control character"},
		{to: "ops@example.com\x00", want: "control character"},
		{to: strings.Repeat("a", 250) + "@example.com", want: "longer than 254"},
	}
	for _, tt := range tests {
		t.Run(tt.to, func(t *testing.T) {
			got, err := checkRecipient(tt.to)
			if tt.want == "" {
				if err != nil || got != tt.to {
					t.Fatalf("checkRecipient(%q) = %q, %v; want it accepted", tt.to, got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkRecipient(%q) error = %v, want one containing %q", tt.to, err, tt.want)
			}
		})
	}
}

func TestEmailConfigCheck(t *testing.T) {
	ok := EmailConfig{Host: "mail.example.com", From: "Cryo <cryo@example.com>"}
	tests := []struct {
		name     string
		edit     func(*EmailConfig)
		wantErr  string
		wantMode string
		wantPort int
	}{
		{name: "defaults", edit: func(*EmailConfig) {}, wantMode: TLSStartTLSRequired, wantPort: 587},
		{name: "none", edit: func(c *EmailConfig) { c.TLS = TLSNone }, wantMode: TLSNone, wantPort: 25},
		{name: "starttls", edit: func(c *EmailConfig) { c.TLS = TLSStartTLS }, wantMode: TLSStartTLS, wantPort: 587},
		{name: "implicit", edit: func(c *EmailConfig) { c.TLS = TLSImplicit }, wantMode: TLSImplicit, wantPort: 465},
		{name: "explicit port", edit: func(c *EmailConfig) { c.TLS = TLSImplicit; c.Port = 2465 }, wantMode: TLSImplicit, wantPort: 2465},
		{name: "IPv6 host", edit: func(c *EmailConfig) { c.Host = "::1" }, wantMode: TLSStartTLSRequired, wantPort: 587},
		{name: "no host", edit: func(c *EmailConfig) { c.Host = "" }, wantErr: "no host"},
		{name: "host with port", edit: func(c *EmailConfig) { c.Host = "mail.example.com:25" }, wantErr: "must not include a port"},
		{name: "host with newline", edit: func(c *EmailConfig) { c.Host = "mail\n.example.com" }, wantErr: "not a host name"},
		{name: "host URL", edit: func(c *EmailConfig) { c.Host = "smtp://mail.example.com" }, wantErr: "not a host name"},
		{name: "bad TLS", edit: func(c *EmailConfig) { c.TLS = "ssl" }, wantErr: `tls "ssl" is not one of`},
		{name: "port too big", edit: func(c *EmailConfig) { c.Port = 70000 }, wantErr: "port 70000 is out of range"},
		{name: "negative port", edit: func(c *EmailConfig) { c.Port = -1 }, wantErr: "out of range"},
		{name: "no from", edit: func(c *EmailConfig) { c.From = "" }, wantErr: "no from address"},
		{name: "bad from", edit: func(c *EmailConfig) { c.From = "not an address" }, wantErr: "is not an email address"},
		{name: "from with CRLF", edit: func(c *EmailConfig) { c.From = "a@b.example\r\nBcc: x@y.example" }, wantErr: "is not an email address"},
		{name: "user without password", edit: func(c *EmailConfig) { c.Username = "u" }, wantErr: "password is empty"},
		{name: "password without user", edit: func(c *EmailConfig) { c.Password = "p" }, wantErr: "no username"},
		{name: "negative timeout", edit: func(c *EmailConfig) { c.Timeout = -time.Second }, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			mode, port, timeout, err := c.check()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				// A config error must also stop SendEmail before any connection.
				if serr := SendEmail(context.Background(), c, testTo, testAlert); serr == nil || !strings.Contains(serr.Error(), tt.wantErr) {
					t.Fatalf("SendEmail error = %v, want one containing %q", serr, tt.wantErr)
				}
				return
			}
			if err != nil || mode != tt.wantMode || port != tt.wantPort || timeout != DefaultEmailTimeout {
				t.Fatalf("check() = %q, %d, %v, %v; want %q, %d, %v", mode, port, timeout, err, tt.wantMode, tt.wantPort, DefaultEmailTimeout)
			}
		})
	}
}

func TestPickMechanism(t *testing.T) {
	tests := []struct {
		name string
		si   smtp.ServerInfo
		want string
		err  string
	}{
		{name: "SCRAM first", si: smtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"PLAIN", "LOGIN", "SCRAM-SHA-1", "SCRAM-SHA-256"}}, want: "SCRAM-SHA-256"},
		{name: "PLAIN over TLS", si: smtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"LOGIN", "PLAIN", "CRAM-MD5"}}, want: "PLAIN"},
		{name: "lower case offer", si: smtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"login"}}, want: "LOGIN"},
		{name: "PLAIN in clear to loopback", si: smtp.ServerInfo{Name: "127.0.0.1", Auth: []string{"PLAIN"}}, want: "PLAIN"},
		{name: "PLAIN in clear to 127.0.0.2", si: smtp.ServerInfo{Name: "127.0.0.2", Auth: []string{"PLAIN"}}, want: "PLAIN"},
		{name: "PLAIN in clear to localhost", si: smtp.ServerInfo{Name: "LocalHost", Auth: []string{"PLAIN"}}, want: "PLAIN"},
		{name: "in clear: CRAM-MD5 over PLAIN", si: smtp.ServerInfo{Name: "mail.example.com", Auth: []string{"PLAIN", "CRAM-MD5"}}, want: "CRAM-MD5"},
		{name: "in clear: SCRAM", si: smtp.ServerInfo{Name: "mail.example.com", Auth: []string{"PLAIN", "SCRAM-SHA-1"}}, want: "SCRAM-SHA-1"},
		{name: "in clear: only PLAIN/LOGIN", si: smtp.ServerInfo{Name: "mail.example.com", Auth: []string{"PLAIN", "LOGIN"}}, err: "refusing to send the password in clear"},
		{name: "no AUTH", si: smtp.ServerInfo{Name: "mail.example.com", TLS: true}, err: "offers no AUTH"},
		{name: "unknown mechanisms", si: smtp.ServerInfo{Name: "mail.example.com", TLS: true, Auth: []string{"GSSAPI", "XOAUTH2\r\nX"}}, err: "it offers GSSAPI XOAUTH2 X;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickMechanism(&tt.si)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("pickMechanism = %q, %v; want an error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("pickMechanism = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	const pw = "hunter2-long"
	b64 := base64.StdEncoding.EncodeToString([]byte(pw))
	base := errors.New("base")
	tests := []struct {
		name    string
		err     error
		pw      string
		want    string
		wrapped bool
	}{
		{name: "nothing to hide", err: errors.Join(base, errors.New("535 denied")), pw: pw, want: "base\n535 denied", wrapped: true},
		{name: "no password", err: base, pw: "", want: "base", wrapped: true},
		{name: "password quoted", err: errors.New("535 bad password " + pw), pw: pw, want: "535 bad password [password]"},
		{name: "base64 quoted", err: errors.New("501 cannot decode " + b64), pw: pw, want: "501 cannot decode [password]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact(tt.err, tt.pw)
			if got.Error() != tt.want {
				t.Errorf("redact = %q, want %q", got, tt.want)
			}
			if errors.Is(got, base) != tt.wrapped {
				t.Errorf("errors.Is(redacted, base) = %v, want %v", !tt.wrapped, tt.wrapped)
			}
		})
	}
}
