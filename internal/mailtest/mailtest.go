// Package mailtest starts real mail servers for tests, on 127.0.0.1: Dovecot for IMAP and
// Debian's aiosmtpd for SMTP (.ci/run installs both). Each server has its
// own temporary directory and port, and is stopped by PID when the test ends.
//
// Where a server cannot run (the package is not installed, or Dovecot without root), the test
// is skipped with the reason and the package that provides it: CI installs both.
package mailtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
)

// python is Debian's interpreter, which has python3-aiosmtpd (another python3 on PATH may not).
const python = "/usr/bin/python3"

// mailUID owns the Dovecot mailbox: Dovecot refuses to serve mail as root.
const mailUID = 65534

// FreePort is a TCP port of 127.0.0.1 that nothing listens on (now: a server started on it
// may find it taken, and should try another).
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening waits (bounded) until addr accepts connections or the process exits.
func waitListening(addr string, exited <-chan struct{}, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(30 * time.Millisecond)
	}
	return false
}

// proc is one running server process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) stop(sig syscall.Signal) {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// IMAP is one Dovecot serving one user's Maildir.
type IMAP struct {
	Host     string
	Port     int // IMAP (STARTTLS offered when started with StartIMAPTLS)
	TLSPort  int // IMAPS (implicit TLS); 0 without TLS
	User     string
	Password string
	Maildir  string // the user's Maildir (cur, new, tmp)

	t    testing.TB
	bin  string
	dir  string
	conf string
	p    *proc
}

var seq atomic.Int64

// StartIMAP starts Dovecot with one user (alice) on a free port of 127.0.0.1, without TLS
// (Dovecot counts 127.0.0.1 as secure, so it accepts the password in clear there).
func StartIMAP(t testing.TB) *IMAP {
	t.Helper()
	return startIMAP(t, "", "")
}

// StartIMAPTLS starts Dovecot with TLS: STARTTLS on Port (required before login) and implicit
// TLS on TLSPort, with the certificate and key in PEM files.
func StartIMAPTLS(t testing.TB, certFile, keyFile string) *IMAP {
	t.Helper()
	return startIMAP(t, certFile, keyFile)
}

func startIMAP(t testing.TB, certFile, keyFile string) *IMAP {
	t.Helper()
	bin, err := exec.LookPath("dovecot")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/dovecot"); e == nil {
			bin = "/usr/sbin/dovecot"
		} else {
			e2e.Skipf(t, "no IMAP server: dovecot is not installed (Debian package dovecot-imapd)")
		}
	}
	if os.Geteuid() != 0 {
		e2e.Skipf(t, "the Dovecot recipe of these tests runs as root (as CI does): it serves the mailbox as uid 65534")
	}
	// The directory must be 0755: Dovecot's unprivileged processes read the user database.
	dir, err := os.MkdirTemp("", "cryo-imap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &IMAP{Host: "127.0.0.1", User: "alice", Password: "imap-s3cret-" + strconv.FormatInt(seq.Add(1), 10), t: t, dir: dir}
	home := filepath.Join(dir, "home", s.User)
	s.Maildir = filepath.Join(home, "Maildir")
	for _, d := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(s.Maildir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Join(dir, "home"), home, s.Maildir, filepath.Join(s.Maildir, "cur"), filepath.Join(s.Maildir, "new"), filepath.Join(s.Maildir, "tmp")} {
		if err := os.Chown(d, mailUID, mailUID); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"base", "state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	passwd := fmt.Sprintf("%s:{PLAIN}%s:%d:%d::%s\n", s.User, s.Password, mailUID, mailUID, home)
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Port = FreePort(t)
	s.conf = filepath.Join(dir, "dovecot.conf")
	ssl := "ssl = no\n"
	listeners := fmt.Sprintf("  inet_listener imap {\n    address = 127.0.0.1\n    port = %d\n  }\n", s.Port)
	if certFile != "" {
		s.TLSPort = FreePort(t)
		// ssl = required: no password before TLS, even on 127.0.0.1.
		ssl = fmt.Sprintf("ssl = required\nssl_cert = <%s\nssl_key = <%s\nssl_min_protocol = TLSv1.2\n", certFile, keyFile)
		listeners += fmt.Sprintf("  inet_listener imaps {\n    address = 127.0.0.1\n    port = %d\n    ssl = yes\n  }\n", s.TLSPort)
	}
	conf := fmt.Sprintf(`protocols = imap
listen = 127.0.0.1
base_dir = %[1]s/base
state_dir = %[1]s/state
log_path = %[1]s/log
%[2]sauth_mechanisms = plain login
passdb {
  driver = passwd-file
  args = %[1]s/passwd
}
userdb {
  driver = passwd-file
  args = %[1]s/passwd
}
mail_location = maildir:~/Maildir
service imap-login {
%[3]s}
`, dir, ssl, listeners)
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s.bin = bin
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server (again, after Stop), on the same port and mailbox.
func (s *IMAP) Start() {
	s.t.Helper()
	if s.p != nil {
		return
	}
	cmd := exec.Command(s.bin, "-c", s.conf, "-F")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start dovecot: %v", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	if !waitListening(addr, p.done, 15*time.Second) {
		p.stop(syscall.SIGKILL)
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		s.t.Fatalf("dovecot did not listen on %s:\n%s\n%s", addr, out.String(), log)
	}
	s.p = p
}

// Stop stops the server (SIGTERM, then SIGKILL); the mailbox stays.
func (s *IMAP) Stop() {
	s.p.stop(syscall.SIGTERM)
	s.p = nil
}

// Log is Dovecot's log, for failure messages.
func (s *IMAP) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

// Deliver puts a mail into the mailbox as a delivery agent does (written in tmp/, moved into
// new/), with its arrival time (the IMAP INTERNALDATE) set to at.
func (s *IMAP) Deliver(raw []byte, at time.Time) {
	s.t.Helper()
	name := fmt.Sprintf("%d.M%dP%d.cryotest", at.Unix(), seq.Add(1), os.Getpid())
	tmp := filepath.Join(s.Maildir, "tmp", name)
	raw = bytes.ReplaceAll(bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chown(tmp, mailUID, mailUID); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chtimes(tmp, at, at); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Maildir, "new", name)); err != nil {
		s.t.Fatal(err)
	}
}

// SMTP is one aiosmtpd storing what it receives in a Maildir.
type SMTP struct {
	Host    string
	Port    int
	Maildir string

	t    testing.TB
	dir  string
	p    *proc
	argv func(addr, maildir string) []string
}

// Aiosmtpd is the python3 command line of aiosmtpd with the Mailbox handler listening on addr
// and storing into maildir, with extra flags (--tlscert/--tlskey for STARTTLS,
// --smtpscert/--smtpskey for implicit TLS): StartSMTPWith's argv.
func Aiosmtpd(flags ...string) func(addr, maildir string) []string {
	return func(addr, maildir string) []string {
		args := []string{"-m", "aiosmtpd", "-n", "-l", addr, "-c", "aiosmtpd.handlers.Mailbox"}
		return append(append(args, flags...), maildir)
	}
}

// SMTPMissing says why aiosmtpd cannot run here (what to install), or nil: for a test that
// leaves out only its email part instead of skipping whole (the scripts' smtpd).
func SMTPMissing() error {
	if out, err := exec.Command(python, "-c", "import aiosmtpd").CombinedOutput(); err != nil {
		return fmt.Errorf("%s cannot import aiosmtpd (Debian package python3-aiosmtpd): %v %s", python, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// StartSMTP starts aiosmtpd (no TLS, no AUTH) on a free port of 127.0.0.1.
func StartSMTP(t testing.TB) *SMTP {
	t.Helper()
	return StartSMTPWith(t, Aiosmtpd())
}

// StartSMTPWith starts an SMTP server of aiosmtpd on a free port of 127.0.0.1, run by Debian's
// python3 with the arguments argv gives for its address and Maildir (Aiosmtpd(flags...), or a
// script of the test's that uses aiosmtpd, such as one requiring AUTH). A port taken by
// another between the probe and the server's bind is tried again with another.
func StartSMTPWith(t testing.TB, argv func(addr, maildir string) []string) *SMTP {
	t.Helper()
	if why := SMTPMissing(); why != nil {
		e2e.Skipf(t, "no SMTP server: %v", why)
	}
	dir := t.TempDir()
	s := &SMTP{Host: "127.0.0.1", Maildir: filepath.Join(dir, "maildir"), t: t, dir: dir, argv: argv}
	var last string
	for try := 0; try < 3; try++ {
		s.Port = FreePort(t)
		if last = s.start(); s.p != nil || !strings.Contains(last, "in use") {
			break
		}
	}
	if s.p == nil {
		t.Fatalf("aiosmtpd did not listen: %s", last)
	}
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server (again, after Stop) on the same port and Maildir.
func (s *SMTP) Start() {
	s.t.Helper()
	if s.p != nil {
		return
	}
	if out := s.start(); s.p == nil {
		s.t.Fatalf("aiosmtpd did not listen on %s:%d: %s", s.Host, s.Port, out)
	}
}

// start starts the server and sets s.p once it listens; else it returns what it printed.
func (s *SMTP) start() string {
	s.t.Helper()
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	cmd := exec.Command(python, s.argv(addr, s.Maildir)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start aiosmtpd: %v", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if !waitListening(addr, p.done, 15*time.Second) {
		p.stop(syscall.SIGKILL)
		return out.String()
	}
	s.p = p
	return ""
}

// Stop stops the server; what it stored stays.
func (s *SMTP) Stop() {
	s.p.stop(syscall.SIGKILL)
	s.p = nil
}

// Received is one mail as the server stored it.
type Received struct {
	Header mail.Header
	Body   string // decoded (quoted-printable), \n line ends
	Raw    []byte // as stored
}

// Messages reads every mail the server stored, oldest first.
func (s *SMTP) Messages() []Received {
	s.t.Helper()
	dir := filepath.Join(s.Maildir, "new")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	type file struct {
		name string
		mod  time.Time
	}
	var files []file
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			s.t.Fatal(err)
		}
		files = append(files, file{e.Name(), fi.ModTime()})
	}
	sort.Slice(files, func(i, j int) bool {
		if !files[i].mod.Equal(files[j].mod) {
			return files[i].mod.Before(files[j].mod)
		}
		return files[i].name < files[j].name
	})
	var out []Received
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			s.t.Fatal(err)
		}
		m, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			s.t.Fatalf("parse %s: %v\n%s", f.name, err, raw)
		}
		var body io.Reader = m.Body
		if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(body)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, Received{Header: m.Header, Body: strings.ReplaceAll(string(b), "\r\n", "\n"), Raw: raw})
	}
	return out
}
