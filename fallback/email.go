package fallback

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// TLS policies for EmailConfig.TLS.
const (
	TLSNone             = "none"              // plain SMTP; never STARTTLS
	TLSStartTLS         = "starttls"          // STARTTLS when the server offers it, else in clear
	TLSStartTLSRequired = "starttls-required" // STARTTLS or fail
	TLSImplicit         = "tls"               // TLS from the first byte (SMTPS, usually port 465)
)

// DefaultEmailTimeout bounds one delivery when EmailConfig.Timeout is zero.
const DefaultEmailTimeout = 30 * time.Second

// Phases of an SMTP delivery, named in an EmailError.
const (
	PhaseDial = "dial" // TCP connect, greeting, EHLO
	PhaseTLS  = "TLS"  // implicit TLS handshake, or STARTTLS and its handshake
	PhaseAuth = "auth" // SMTP AUTH
	PhaseSend = "send" // MAIL FROM, RCPT TO, DATA
)

// maxAddressLen is the longest forward path SMTP allows (RFC 5321 4.5.3.1.3 less the brackets).
const maxAddressLen = 254

// EmailConfig is how to reach the SMTP server.
type EmailConfig struct {
	Host     string
	Port     int    // 0 = 25 for "none", 587 for STARTTLS, 465 for "tls"
	TLS      string // TLSNone, TLSStartTLS, TLSStartTLSRequired or TLSImplicit; "" = TLSStartTLSRequired
	Username string // "" = no authentication
	Password string // already resolved by PasswordFrom
	From     string // one address, a display name is allowed
	Timeout  time.Duration
	RootCAs  *x509.CertPool // nil = the system roots
}

// EmailError is a delivery that failed: where, in which phase, and why. Its text never holds
// the password.
type EmailError struct {
	To    string
	Addr  string // host:port
	Phase string // PhaseDial, PhaseTLS, PhaseAuth or PhaseSend
	Err   error
}

func (e *EmailError) Error() string {
	return fmt.Sprintf("email to %s via %s: %s: %v", e.To, e.Addr, e.Phase, e.Err)
}

func (e *EmailError) Unwrap() error { return e.Err }

// SendEmail delivers alert a to the single address to. It makes one attempt, bounded by
// c.Timeout and ctx.
func SendEmail(ctx context.Context, c EmailConfig, to string, a Alert) error {
	m := Mail{Subject: Subject(a), Body: Body(a), Date: a.Time, AutoSubmitted: "auto-generated"}
	return SendMail(ctx, c, to, m)
}

// Mail is one plain-text mail that is not an alert: a reply or a notice that `cryochamber sync`
// carries to a person, threaded with Message-ID, In-Reply-To and References.
type Mail struct {
	Subject string
	Body    string // plain text; cut at MaxMailBody
	Date    time.Time
	// MessageID, InReplyTo and References are message identifiers without angle brackets
	// (left@right). Each must pass ValidMessageID: they may come from mail a stranger wrote.
	MessageID  string
	InReplyTo  string
	References []string
	// AutoSubmitted is the RFC 3834 header ("auto-generated", "auto-replied"): it tells
	// vacation responders and ticket systems not to answer, so no mail loop can start.
	AutoSubmitted string
}

// MaxMailBody bounds the body of a Mail.
const MaxMailBody = 256 << 10

// maxReferences bounds the References header: the root and the latest messages of a thread are
// what threading needs.
const maxReferences = 20

// ValidMessageID reports whether id is a message identifier we may write into a header: the
// dot-atom form id-left@id-right of RFC 5322 3.6.4 (no brackets, no quoted or domain-literal
// forms), printable ASCII, at most 250 bytes. Anything else is refused, never repaired: a
// header built from it could otherwise carry a line break into the mail.
func ValidMessageID(id string) bool {
	if id == "" || len(id) > 250 {
		return false
	}
	left, right, ok := strings.Cut(id, "@")
	if !ok || left == "" || right == "" || strings.Contains(right, "@") {
		return false
	}
	for _, part := range []string{left, right} {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".") || strings.Contains(part, "..") {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>[]:;@\,"`, c) >= 0 {
				return false
			}
		}
	}
	return true
}

// SendMail delivers m to the single address to, with the same connection rules, timeouts and
// error phases as SendEmail. It makes one attempt.
func SendMail(ctx context.Context, c EmailConfig, to string, m Mail) error {
	mode, port, timeout, err := c.check()
	if err != nil {
		return err
	}
	rcpt, err := checkRecipient(to)
	if err != nil {
		return err
	}
	msg, err := newMessage(c.From, rcpt, m)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(c.Host, strconv.Itoa(port))
	fail := func(phase string, err error) error {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			// A cancelled delivery fails as whatever I/O was under way; say why it was.
			err = fmt.Errorf("%w (%v)", cerr, err)
		}
		return &EmailError{To: rcpt, Addr: addr, Phase: phase, Err: redact(err, c.Password)}
	}
	if err := ctx.Err(); err != nil {
		return fail(PhaseDial, err)
	}

	tlsConf := &tls.Config{ServerName: c.Host, RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12}
	s := &smtpSession{phase: PhaseDial}
	defer s.close()
	// WithTLSPolicy and an explicit port rather than WithTLSPortPolicy/WithSSLPort: those fall
	// back to port 25 when the first port fails, and an alert must not quietly go in clear to a
	// port nobody configured.
	opts := []gomail.Option{
		gomail.WithPort(port),
		gomail.WithTimeout(timeout),
		gomail.WithTLSConfig(tlsConf),
		gomail.WithDialContextFunc(s.dialer(ctx, mode == TLSImplicit, tlsConf)),
	}
	switch mode {
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case TLSStartTLSRequired:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSImplicit:
		// Our dialer does the handshake; WithSSL tells go-mail not to try STARTTLS on top.
		opts = append(opts, gomail.WithSSL(), gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if c.Username != "" {
		opts = append(opts, gomail.WithSMTPAuthCustom(&pickAuth{user: c.Username, pass: c.Password, s: s}))
	}
	client, err := gomail.NewClient(c.Host, opts...)
	if err != nil {
		return fail(PhaseDial, err)
	}
	sc, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		phase := s.get()
		// go-mail refuses a server without STARTTLS under TLSMandatory before sending anything,
		// so our connection watcher cannot see it; its error names STARTTLS.
		if phase == PhaseDial && mode == TLSStartTLSRequired && strings.Contains(err.Error(), "STARTTLS") {
			phase = PhaseTLS
		}
		return fail(phase, err)
	}
	s.set(PhaseSend)
	if err := client.SendWithSMTPClient(sc, msg); err != nil {
		return fail(PhaseSend, err)
	}
	// The server has taken the message; a failed QUIT changes nothing for the recipient, and
	// reporting it would make the caller send the alert twice.
	_ = client.CloseWithSMTPClient(sc)
	return nil
}

// check validates the configuration and fills in the defaults.
func (c EmailConfig) check() (mode string, port int, timeout time.Duration, err error) {
	bad := func(format string, args ...any) (string, int, time.Duration, error) {
		return "", 0, 0, fmt.Errorf("email config: "+format, args...)
	}
	switch {
	case c.Host == "":
		return bad("no host")
	case strings.ContainsFunc(c.Host, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) ||
		strings.ContainsAny(c.Host, "/[]@"):
		return bad("host %q is not a host name or IP address", c.Host)
	case strings.Contains(c.Host, ":") && net.ParseIP(c.Host) == nil:
		return bad("host %q must not include a port: set port", c.Host)
	}
	mode = c.TLS
	if mode == "" {
		mode = TLSStartTLSRequired
	}
	switch mode {
	case TLSNone:
		port = 25
	case TLSStartTLS, TLSStartTLSRequired:
		port = 587
	case TLSImplicit:
		port = 465
	default:
		return bad("tls %q is not one of none, starttls, starttls-required, tls", c.TLS)
	}
	if c.Port < 0 || c.Port > 65535 {
		return bad("port %d is out of range", c.Port)
	}
	if c.Port != 0 {
		port = c.Port
	}
	if c.From == "" {
		return bad("no from address")
	}
	if _, err := mail.ParseAddress(c.From); err != nil || strings.ContainsFunc(c.From, unicode.IsControl) {
		return bad("from %q is not an email address", c.From)
	}
	switch {
	case c.Username != "" && c.Password == "":
		return bad("username %q is set but the password is empty (set password_env or password_command)", c.Username)
	case c.Username == "" && c.Password != "":
		return bad("a password is set but no username")
	}
	if c.Timeout < 0 {
		return bad("timeout %v is negative", c.Timeout)
	}
	timeout = c.Timeout
	if timeout == 0 {
		timeout = DefaultEmailTimeout
	}
	return mode, port, timeout, nil
}

// checkRecipient accepts exactly one bare address. Targets can come from markers: a display
// name, a list or a group would let one alert reach people nobody approved.
func checkRecipient(to string) (string, error) {
	if to == "" {
		return "", errors.New("email target is empty")
	}
	if len(to) > maxAddressLen {
		return "", fmt.Errorf("email target %.40q... is longer than %d bytes", to, maxAddressLen)
	}
	if strings.ContainsFunc(to, unicode.IsControl) {
		return "", fmt.Errorf("email target %q contains a control character", to)
	}
	addr, err := mail.ParseAddress(to)
	if err != nil {
		return "", fmt.Errorf("email target %q is not one email address: %w", to, err)
	}
	if addr.Name != "" {
		return "", fmt.Errorf("email target %q has a display name: give the bare address %s", to, addr.Address)
	}
	if addr.Address != to {
		return "", fmt.Errorf("email target %q must be a bare address such as ops@example.com", to)
	}
	return to, nil
}

// newMessage builds the mail. Every header value is sanitized or checked here (the subject made
// one line, message identifiers validated), never taken raw from alert or message text.
func newMessage(from, to string, mail Mail) (*gomail.Msg, error) {
	m := gomail.NewMsg()
	if err := m.From(from); err != nil {
		return nil, fmt.Errorf("email from %q: %w", from, err)
	}
	if err := m.To(to); err != nil {
		return nil, fmt.Errorf("email target %q: %w", to, err)
	}
	m.Subject(termtext.OneLine(mail.Subject, 200))
	m.SetBodyString(gomail.TypeTextPlain, sanitizeBody(mail.Body, MaxMailBody))
	if !mail.Date.IsZero() {
		m.SetDateWithValue(mail.Date)
	}
	m.SetUserAgent("cryochamber")
	for _, id := range append([]string{mail.MessageID, mail.InReplyTo}, mail.References...) {
		if id != "" && !ValidMessageID(id) {
			return nil, fmt.Errorf("email: %q is not a message identifier", termtext.OneLine(id, 80))
		}
	}
	if mail.MessageID != "" {
		m.SetMessageIDWithValue(mail.MessageID)
	}
	if mail.InReplyTo != "" {
		m.SetGenHeader(gomail.HeaderInReplyTo, "<"+mail.InReplyTo+">")
	}
	if refs := mail.References; len(refs) > 0 {
		if len(refs) > maxReferences {
			// Keep the root (the first) and the latest ones.
			refs = append(refs[:1:1], refs[len(refs)-maxReferences+1:]...)
		}
		m.SetGenHeader(gomail.HeaderReferences, "<"+strings.Join(refs, "> <")+">")
	}
	// RFC 3834: tells vacation responders and ticket systems not to answer, so no mail of ours
	// can start a mail loop.
	switch mail.AutoSubmitted {
	case "":
	case "auto-generated", "auto-replied":
		m.SetGenHeader(gomail.Header("Auto-Submitted"), mail.AutoSubmitted)
	default:
		return nil, fmt.Errorf("email: Auto-Submitted %q is not auto-generated or auto-replied", termtext.OneLine(mail.AutoSubmitted, 40))
	}
	return m, nil
}

// smtpSession follows one delivery so an error can say in which phase it happened, and owns
// the raw connection so that it is closed however go-mail returns and as soon as ctx ends.
type smtpSession struct {
	mu    sync.Mutex
	phase string
	conn  net.Conn
	stop  func() bool
}

func (s *smtpSession) set(p string) { s.mu.Lock(); s.phase = p; s.mu.Unlock() }

func (s *smtpSession) get() string { s.mu.Lock(); defer s.mu.Unlock(); return s.phase }

func (s *smtpSession) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	if s.conn != nil {
		_ = s.conn.Close()
	}
}

// dialer connects and, for implicit TLS, does the handshake itself so that a handshake error
// is told apart from a refused connection. ctx is the caller's: go-mail only honours a
// context while dialling, so closing the connection when ctx ends is what makes a hung server
// give up.
func (s *smtpSession) dialer(ctx context.Context, implicit bool, conf *tls.Config) gomail.DialContextFunc {
	return func(dctx context.Context, network, address string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(dctx, network, address)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.conn = raw
		s.stop = context.AfterFunc(ctx, func() { _ = raw.Close() })
		s.mu.Unlock()
		if !implicit {
			return &watchConn{Conn: raw, s: s}, nil
		}
		s.set(PhaseTLS)
		tc := tls.Client(raw, conf)
		if err := tc.HandshakeContext(dctx); err != nil {
			return nil, err
		}
		s.set(PhaseDial)
		// Returned as the *tls.Conn itself: go-mail's SMTP client only knows the session is
		// encrypted (and allows PLAIN) by that type.
		return tc, nil
	}
}

// watchConn notes when the client asks for STARTTLS. The command goes out in clear, so the
// moment it is written is the start of the TLS phase.
type watchConn struct {
	net.Conn
	s *smtpSession
}

func (w *watchConn) Write(p []byte) (int, error) {
	if len(p) >= 8 && bytes.EqualFold(p[:8], []byte("STARTTLS")) {
		w.s.set(PhaseTLS)
	}
	return w.Conn.Write(p)
}

// pickAuth chooses the SASL mechanism from what the server offers once it is asked to
// authenticate, and marks the auth phase.
type pickAuth struct {
	user, pass string
	s          *smtpSession
	inner      smtp.Auth
}

func (p *pickAuth) Start(si *smtp.ServerInfo) (string, []byte, error) {
	p.s.set(PhaseAuth)
	mech, err := pickMechanism(si)
	if err != nil {
		return "", nil, err
	}
	switch mech {
	case "SCRAM-SHA-256":
		p.inner = smtp.ScramSHA256Auth(p.user, p.pass)
	case "SCRAM-SHA-1":
		p.inner = smtp.ScramSHA1Auth(p.user, p.pass)
	case "PLAIN":
		// pickMechanism has checked TLS or loopback; go-mail's own check knows fewer loopback names.
		p.inner = smtp.PlainAuth("", p.user, p.pass, si.Name, true)
	case "LOGIN":
		p.inner = smtp.LoginAuth(p.user, p.pass, si.Name, true)
	default:
		p.inner = smtp.CRAMMD5Auth(p.user, p.pass)
	}
	return p.inner.Start(si)
}

func (p *pickAuth) Next(fromServer []byte, more bool) ([]byte, error) {
	if p.inner == nil {
		return nil, errors.New("authentication was not started")
	}
	return p.inner.Next(fromServer, more)
}

// authPreference lists the mechanisms we speak, best first: SCRAM never shows the password to
// the server; PLAIN and LOGIN show it, so they need TLS; CRAM-MD5 is last because it makes the
// server keep the password in clear.
var authPreference = []string{"SCRAM-SHA-256", "SCRAM-SHA-1", "PLAIN", "LOGIN", "CRAM-MD5"}

func pickMechanism(si *smtp.ServerInfo) (string, error) {
	offered := make(map[string]bool, len(si.Auth))
	for _, m := range si.Auth {
		offered[strings.ToUpper(m)] = true
	}
	clearOK := si.TLS || isLoopback(si.Name)
	inClear := false
	for _, m := range authPreference {
		if !offered[m] {
			continue
		}
		if (m == "PLAIN" || m == "LOGIN") && !clearOK {
			inClear = true
			continue
		}
		return m, nil
	}
	switch {
	case len(si.Auth) == 0:
		return "", errors.New(`the server offers no AUTH (many offer it only after STARTTLS: use tls = "starttls-required")`)
	case inClear:
		return "", errors.New(`refusing to send the password in clear: the server offers only PLAIN or LOGIN and the connection is not encrypted (use tls = "starttls-required" or "tls")`)
	}
	return "", fmt.Errorf("the server offers no AUTH mechanism we speak (it offers %s; we speak %s)",
		termtext.OneLine(strings.Join(si.Auth, " "), 200), strings.Join(authPreference, " "))
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redact removes the password, and its base64 form as it travels in AUTH PLAIN and LOGIN,
// from an error's text: a server may quote what it was sent, and the error ends up in the
// chamber's log. The wrapped chain is dropped only when there was something to remove.
func redact(err error, password string) error {
	if err == nil || password == "" {
		return err
	}
	msg := err.Error()
	out := msg
	for _, secret := range []string{password, base64.StdEncoding.EncodeToString([]byte(password))} {
		out = strings.ReplaceAll(out, secret, "[password]")
	}
	if out == msg {
		return err
	}
	return errors.New(out)
}
