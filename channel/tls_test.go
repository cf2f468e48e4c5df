package channel

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/internal/mailtest"
)

// testCA makes a CA and a certificate for 127.0.0.1, written as PEM files.
func testCA(t *testing.T) (pool *x509.CertPool, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cryochamber test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	// Dovecot reads the files as root before it drops privileges; the directory is its own.
	dir, err := os.MkdirTemp("", "cryo-pki-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return pool, certFile, keyFile
}

// The IMAP connection with implicit TLS (the default) and with STARTTLS, against Dovecot
// requiring TLS; a certificate that does not verify stops the pull before the password is sent.
func TestEmailIMAPTLS(t *testing.T) {
	pool, cert, key := testCA(t)
	imap := mailtest.StartIMAPTLS(t, cert, key)
	smtp := mailtest.StartSMTP(t)
	for _, tt := range []struct {
		mode string
		port int
		pool *x509.CertPool
		err  string
	}{
		{"tls", imap.TLSPort, pool, ""},
		{"starttls", imap.Port, pool, ""},
		{"tls", imap.TLSPort, x509.NewCertPool(), "connect: TLS: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"starttls", imap.Port, x509.NewCertPool(), "connect: STARTTLS: tls: failed to verify certificate: x509: certificate signed by unknown authority"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			c := newChamber(t)
			ch, err := NewEmail(EmailConfig{ChamberID: c.id, Name: "garden", Dir: c.dir, To: []string{"alice@example.com"}, AllowedSenders: []string{"alice@example.com"},
				SMTP: fallback.EmailConfig{Host: smtp.Host, Port: smtp.Port, TLS: fallback.TLSNone, From: cryoFrom},
				IMAP: IMAPConfig{Host: "127.0.0.1", Port: tt.port, TLS: tt.mode, Username: imap.User, Password: secret(imap.Password), RootCAs: tt.pool}})
			if err != nil {
				t.Fatal(err)
			}
			logins := strings.Count(imap.Log(), "Login: user=<alice>")
			imap.Deliver(reply("alice@example.com", "tls-"+tt.mode+"-"+t.Name()+"@mail.example.com", "", "", "[cryo-garden-1234abcd] over "+tt.mode, "over TLS\n"), t0.Add(-time.Minute))
			r := c.run1(t, ch)
			if tt.err != "" {
				if r.Err == nil || !strings.Contains(r.Err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", r.Err, tt.err)
				}
				if strings.Count(imap.Log(), "Login: user=<alice>") != logins {
					t.Error("logged in over a connection whose certificate did not verify")
				}
				return
			}
			noErr(t, r)
			if len(r.Pulled) == 0 {
				t.Fatalf("nothing pulled over %s: %+v\n%s", tt.mode, r, imap.Log())
			}
		})
	}
}
