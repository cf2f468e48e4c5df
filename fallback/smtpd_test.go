package fallback

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/mailtest"
)

// The real SMTP server of these tests is Debian's python3-aiosmtpd, started by
// internal/mailtest (with the system python: another python3 on PATH may lack the module).

// smtpd is one running aiosmtpd that stores what it receives in a Maildir.
type smtpd struct {
	host    string
	port    int
	maildir string
}

func (s *smtpd) addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

// startAiosmtpd runs `python3 -m aiosmtpd` with the Mailbox handler and extra flags
// (--tlscert/--tlskey for STARTTLS, --smtpscert/--smtpskey for implicit TLS).
func startAiosmtpd(t *testing.T, flags ...string) *smtpd {
	t.Helper()
	return startSMTPServer(t, mailtest.Aiosmtpd(flags...))
}

const (
	authUser     = "cryo-user"
	authPassword = "s3cret-Pa55word"
)

// startAuthServer runs testdata/smtpd_auth.py: aiosmtpd requiring AUTH as authUser/authPassword.
func startAuthServer(t *testing.T, flags ...string) *smtpd {
	script, err := filepath.Abs("testdata/smtpd_auth.py")
	if err != nil {
		t.Fatal(err)
	}
	return startSMTPServer(t, func(addr, maildir string) []string {
		args := []string{script, "--listen", addr, "--user", authUser, "--password", authPassword}
		return append(append(args, flags...), maildir)
	})
}

// startSMTPServer runs one of them (internal/mailtest, which skips where aiosmtpd is missing).
func startSMTPServer(t *testing.T, argv func(addr, maildir string) []string) *smtpd {
	t.Helper()
	srv := mailtest.StartSMTPWith(t, argv)
	return &smtpd{host: srv.Host, port: srv.Port, maildir: srv.Maildir}
}

// received is one message as the server stored it, decoded.
type received struct {
	header mail.Header
	body   string
	raw    string
}

// messages reads every message the server has stored.
func (s *smtpd) messages(t *testing.T) []received {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.maildir, "new"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var out []received
	for _, name := range names {
		raw, err := os.ReadFile(filepath.Join(s.maildir, "new", name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := mail.ReadMessage(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatalf("parse %s: %v\n%s", name, err, raw)
		}
		var body io.Reader = m.Body
		if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(body)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatalf("read body of %s: %v", name, err)
		}
		out = append(out, received{header: m.Header, body: strings.ReplaceAll(string(b), "\r\n", "\n"), raw: string(raw)})
	}
	return out
}

func decodeHeader(t *testing.T, v string) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(v)
	if err != nil {
		t.Fatalf("decode header %q: %v", v, err)
	}
	return s
}

// testPKI is a CA and a server certificate for 127.0.0.1, ::1 and localhost, made per test.
type testPKI struct {
	pool     *x509.CertPool
	certFile string
	keyFile  string
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cryochamber test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := testPKI{pool: x509.NewCertPool(), certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	p.pool.AddCert(ca)
	if err := os.WriteFile(p.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p testPKI) startTLSFlags() []string {
	return []string{"--tlscert", p.certFile, "--tlskey", p.keyFile}
}
func (p testPKI) smtpsFlags() []string {
	return []string{"--smtpscert", p.certFile, "--smtpskey", p.keyFile}
}
