package channel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/mail"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	gomessage "github.com/emersion/go-message"
	"github.com/emersion/go-message/charset"
	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"

	"github.com/cryochamber/cryochamber/fallback"
	"github.com/cryochamber/cryochamber/internal/termtext"
)

// EmailConfig is a chamber's email thread: its outbox mailed to To by SMTP, and the replies of
// AllowedSenders read from an IMAP mailbox.
type EmailConfig struct {
	ChamberID string // names the thread (Message-IDs, the subject)
	Name      string // the chamber's name, in the subject
	Dir       string // the chamber's path, in each mail's footer
	To        []string
	// AllowedSenders are the From addresses whose replies reach the agent. From can be
	// forged: use a mailbox that only receives mail the server checked (SPF/DKIM/DMARC).
	AllowedSenders []string
	SMTP           fallback.EmailConfig                      // Password is filled by SMTPPassword
	SMTPPassword   func(ctx context.Context) (string, error) `json:"-"`
	IMAP           IMAPConfig
	Summaries      bool
}

// IMAPConfig is where the replies arrive.
type IMAPConfig struct {
	Host     string
	Port     int
	TLS      string // "tls" (implicit, 993), "starttls", or "none" (this machine only)
	Username string
	Password func(ctx context.Context) (string, error) `json:"-"`
	Mailbox  string                                    // "" = INBOX; opened read-only: nothing in it is ever changed
	RootCAs  *x509.CertPool                            `json:"-"` // nil: the system's
	Timeout  time.Duration                             // one pull; 0: DefaultIMAPTimeout
}

// DefaultIMAPTimeout bounds one pull.
const DefaultIMAPTimeout = 60 * time.Second

// Bounds of one pull.
const (
	maxMailsPerPull = 200     // the rest is read at the next poll
	maxRawMail      = 1 << 20 // a mail larger than this is announced, not read
	maxMailParts    = 50      // MIME parts looked at
	maxReferenceIDs = 10      // References kept for threading
)

type email struct {
	c      EmailConfig
	domain string // of the From address: the right side of our Message-IDs
	smtpPW string
	havePW bool
}

// NewEmail returns the email channel.
func NewEmail(c EmailConfig) (Channel, error) {
	if c.ChamberID == "" || len(c.To) == 0 {
		return nil, errors.New("email: a chamber ID and at least one address in to are needed")
	}
	if c.IMAP.Mailbox == "" {
		c.IMAP.Mailbox = "INBOX"
	}
	if c.IMAP.Timeout == 0 {
		c.IMAP.Timeout = DefaultIMAPTimeout
	}
	switch c.IMAP.TLS {
	case "tls", "starttls":
	case "none":
		if !isLoopback(c.IMAP.Host) {
			return nil, fmt.Errorf("email: imap_tls none is only for a server on this machine, not %s", c.IMAP.Host)
		}
	default:
		return nil, fmt.Errorf("email: unknown imap_tls %q", c.IMAP.TLS)
	}
	domain := "cryochamber.invalid"
	if a, err := mail.ParseAddress(c.SMTP.From); err == nil {
		if _, d, ok := strings.Cut(a.Address, "@"); ok && fallback.ValidMessageID("x@"+d) {
			domain = d
		}
	}
	return &email{c: c, domain: domain}, nil
}

func isLoopback(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (e *email) Name() string    { return "email" }
func (e *email) Summaries() bool { return e.c.Summaries }

// subject is the thread's subject: the chamber ID in it lets a person start a new thread too.
func (e *email) subject() string {
	return "[" + e.c.ChamberID + "] " + termtext.OneLine(e.c.Name, 80)
}

// ours reports a Message-ID of this chamber's thread: <ref>.<chamber ID>@<domain>.
func (e *email) ours(id string) bool {
	left, _, ok := strings.Cut(id, "@")
	return ok && strings.HasSuffix(left, "."+e.c.ChamberID)
}

func (e *email) Push(ctx context.Context, st *State, out Outgoing, now time.Time) (string, error) {
	if !e.havePW && e.c.SMTPPassword != nil {
		pw, err := e.c.SMTPPassword(ctx)
		if err != nil {
			return "", err
		}
		e.smtpPW, e.havePW = pw, true
	}
	cfg := e.c.SMTP
	cfg.Password = e.smtpPW
	id := out.Ref + "." + e.c.ChamberID + "@" + e.domain
	parent, refs := e.thread(st, out)
	subject := e.subject()
	if parent != "" {
		subject = "Re: " + subject
	}
	auto := "auto-generated"
	if out.Kind == "reply" {
		auto = "auto-replied"
	}
	body := headline(out) + "\n\n" + strings.TrimRight(cleanText(out.Body, fallback.MaxMailBody-4096), "\n") +
		"\n\n-- \ncryochamber, chamber " + termtext.OneLine(e.c.Dir, 300) + "\nAnswer this mail to write to the agent (only what you write is read; the quoted text is left out).\n"
	m := fallback.Mail{Subject: subject, Body: body, Date: out.Time, MessageID: id, InReplyTo: parent, References: refs, AutoSubmitted: auto}
	for _, to := range e.c.To {
		if err := fallback.SendMail(ctx, cfg, to, m); err != nil {
			return "", err
		}
	}
	if st.Thread.Root == "" {
		st.Thread.Root = id
	}
	st.Thread.Last = id
	return "msgid:" + id, nil
}

// thread finds what a mail answers: the latest mail of the messages a reply answers that came
// by email, else the thread's latest mail; and the References that go with it.
func (e *email) thread(st *State, out Outgoing) (parent string, refs []string) {
	var theirs []string
	for i := len(out.InReplyTo) - 1; i >= 0; i-- {
		if th := st.Threads[out.InReplyTo[i]]; len(th) > 0 {
			theirs = th
			break
		}
	}
	add := func(id string) {
		if id != "" && fallback.ValidMessageID(id) && !contains(refs, id) {
			refs = append(refs, id)
		}
	}
	add(st.Thread.Root)
	if len(theirs) > 0 {
		for _, r := range theirs[1:] {
			add(r)
		}
		parent = theirs[0]
	} else {
		parent = st.Thread.Last
	}
	add(parent)
	if !fallback.ValidMessageID(parent) {
		parent = ""
	}
	return parent, refs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Find cannot ask an SMTP server what it took: the item is sent again, with the same
// Message-ID, which mail clients show once.
func (e *email) Find(context.Context, *State, Outgoing, time.Time) (string, bool, error) {
	return "", false, nil
}

// imapError says which step of talking to the IMAP server failed; its text never holds the
// password.
type imapError struct {
	addr, step string
	err        error
}

func (e *imapError) Error() string { return fmt.Sprintf("imap %s: %s: %v", e.addr, e.step, e.err) }
func (e *imapError) Unwrap() error { return e.err }

func (e *email) Pull(ctx context.Context, st *State, now time.Time) (*Pulled, error) {
	ctx, cancel := context.WithTimeout(ctx, e.c.IMAP.Timeout)
	defer cancel()
	addr := net.JoinHostPort(e.c.IMAP.Host, strconv.Itoa(e.c.IMAP.Port))
	pw := ""
	fail := func(step string, err error) error {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%v)", cerr, err)
		}
		if pw != "" && strings.Contains(err.Error(), pw) {
			err = errors.New(strings.ReplaceAll(err.Error(), pw, "[password]"))
		}
		return &imapError{addr: addr, step: step, err: err}
	}
	if e.c.IMAP.Password != nil {
		var err error
		if pw, err = e.c.IMAP.Password(ctx); err != nil {
			return nil, err
		}
	}
	c, closeConn, err := e.dial(ctx, addr)
	if err != nil {
		return nil, fail("connect", err)
	}
	defer closeConn()
	if err := c.Login(e.c.IMAP.Username, pw).Wait(); err != nil {
		return nil, fail("login as "+termtext.OneLine(e.c.IMAP.Username, 100), err)
	}
	sel, err := c.Select(e.c.IMAP.Mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return nil, fail("open mailbox "+termtext.OneLine(e.c.IMAP.Mailbox, 100), err)
	}
	p := &Pulled{Cursor: st.Cursor}
	var crit imap.SearchCriteria
	if st.Cursor.UIDValidity != sel.UIDValidity || st.Cursor.UID == 0 {
		// A mailbox read for the first time, or renumbered by the server: by date. What was
		// read already is recognised by its Message-ID.
		crit.Since = st.Floor
		p.Cursor = Cursor{UIDValidity: sel.UIDValidity}
	} else {
		if sel.UIDNext != 0 && uint32(sel.UIDNext) <= st.Cursor.UID+1 {
			_ = c.Logout().Wait()
			return p, nil
		}
		crit.UID = []imap.UIDSet{{{Start: imap.UID(st.Cursor.UID + 1), Stop: 0}}}
	}
	found, err := c.UIDSearch(&crit, nil).Wait()
	if err != nil {
		return nil, fail("search", err)
	}
	var uids []imap.UID
	for _, u := range found.AllUIDs() {
		if uint32(u) > p.Cursor.UID {
			uids = append(uids, u)
		}
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	if len(uids) > maxMailsPerPull {
		uids = uids[:maxMailsPerPull]
		p.Warnings = append(p.Warnings, fmt.Sprintf("email: more than %d new mails: the rest is read at the next poll", maxMailsPerPull))
	}
	if len(uids) == 0 {
		_ = c.Logout().Wait()
		return p, nil
	}
	heads, err := e.heads(c, uids)
	if err != nil {
		return nil, fail("fetch", err)
	}
	threadIDs := map[string]bool{}
	for _, th := range st.Threads {
		if len(th) > 0 {
			threadIDs[th[0]] = true
		}
	}
	for _, h := range heads {
		h.validity = sel.UIDValidity
		if uint32(h.uid) > p.Cursor.UID {
			p.Cursor.UID = uint32(h.uid)
		}
		in, ig, ok := e.classify(h, st, threadIDs)
		switch {
		case ig != nil:
			p.Ignored = append(p.Ignored, *ig)
		case ok:
			if h.size <= maxRawMail {
				raw, err := e.body(c, h.uid)
				if err != nil {
					return nil, fail("fetch", err)
				}
				in.Body = mailBody(raw)
			} else {
				in.Body = fmt.Sprintf("(A mail of %d bytes arrived from %s; cryochamber reads mails of at most %d bytes. Read it in a mail client.)\n", h.size, h.from, maxRawMail)
			}
			p.Messages = append(p.Messages, in)
			if len(in.Thread) > 0 {
				threadIDs[in.Thread[0]] = true
				st.Thread.Last = in.Thread[0]
			}
		}
	}
	_ = c.Logout().Wait()
	return p, nil
}

// dial connects and starts TLS as configured. The connection is closed when ctx ends, which is
// what bounds every IMAP command in time (the client has no deadlines of its own).
func (e *email) dial(ctx context.Context, addr string) (*imapclient.Client, func(), error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	conf := &tls.Config{ServerName: e.c.IMAP.Host, RootCAs: e.c.IMAP.RootCAs, MinVersion: tls.VersionTLS12}
	opts := &imapclient.Options{TLSConfig: conf, WordDecoder: &mime.WordDecoder{CharsetReader: charset.Reader}}
	var c *imapclient.Client
	switch e.c.IMAP.TLS {
	case "tls":
		tc := tls.Client(raw, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			stop()
			_ = raw.Close()
			return nil, nil, fmt.Errorf("TLS: %w", err)
		}
		c = imapclient.New(tc, opts)
	case "starttls":
		c, err = imapclient.NewStartTLS(raw, opts)
		if err != nil {
			stop()
			_ = raw.Close()
			return nil, nil, fmt.Errorf("STARTTLS: %w", err)
		}
	default:
		c = imapclient.New(raw, opts)
	}
	closeAll := func() {
		stop()
		_ = c.Close()
	}
	if err := c.WaitGreeting(); err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("greeting: %w", err)
	}
	return c, closeAll, nil
}

// head is what is known of a mail before its body is read.
type head struct {
	validity   uint32 // the mailbox's UIDVALIDITY: a UID means something only with it
	uid        imap.UID
	size       int64
	internal   time.Time
	from       string
	fromCount  int
	subject    string
	messageID  string
	inReplyTo  []string
	references []string
	auto       string // Auto-Submitted
	precedence string
	// headerFrom is the one address of the From header as written, parsed strictly; "" when
	// there is not exactly one From line with exactly one well-formed address in it.
	headerFrom string
}

// heads fetches the envelope and the few header fields a decision needs, for every UID.
func (e *email) heads(c *imapclient.Client, uids []imap.UID) ([]head, error) {
	section := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true,
		HeaderFields: []string{"From", "References", "Auto-Submitted", "Precedence"}}
	opts := &imap.FetchOptions{UID: true, Envelope: true, InternalDate: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{section}}
	cmd := c.Fetch(imap.UIDSetNum(uids...), opts)
	var out []head
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		var h head
		for item := msg.Next(); item != nil; item = msg.Next() {
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				h.uid = it.UID
			case imapclient.FetchItemDataRFC822Size:
				h.size = it.Size
			case imapclient.FetchItemDataInternalDate:
				h.internal = it.Time
			case imapclient.FetchItemDataEnvelope:
				env := it.Envelope
				h.subject, h.messageID, h.inReplyTo = env.Subject, env.MessageID, env.InReplyTo
				for _, a := range env.From {
					if addr := a.Addr(); addr != "" {
						h.fromCount++
						h.from = addr
					}
				}
			case imapclient.FetchItemDataBodySection:
				if it.Literal == nil {
					continue
				}
				data, err := io.ReadAll(io.LimitReader(it.Literal, 64<<10))
				if err != nil {
					return nil, err
				}
				hdr, err := textproto.ReadHeader(bufio.NewReader(io.MultiReader(bytes.NewReader(data), strings.NewReader("\r\n"))))
				if err != nil {
					continue // unreadable header fields: treated as absent
				}
				mh := gomail.Header{Header: gomessage.Header{Header: hdr}}
				if refs, err := mh.MsgIDList("References"); err == nil {
					h.references = refs
				}
				if froms := hdr.Values("From"); len(froms) == 1 {
					if list, err := gomail.ParseAddressList(froms[0]); err == nil && len(list) == 1 {
						h.headerFrom = list[0].Address
					}
				}
				h.auto = strings.ToLower(strings.TrimSpace(hdr.Get("Auto-Submitted")))
				h.precedence = strings.ToLower(strings.TrimSpace(hdr.Get("Precedence")))
			}
		}
		if h.uid != 0 {
			out = append(out, h)
		}
	}
	if err := cmd.Close(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].uid < out[j].uid })
	return out, nil
}

// classify decides what a mail is: this chamber's, from an allowed sender (an Incoming); this
// chamber's but refused (an Ignored); or not this chamber's at all (neither: a shared mailbox
// holds other mail, which is none of our business).
func (e *email) classify(h head, st *State, threadIDs map[string]bool) (Incoming, *Ignored, bool) {
	if !h.internal.IsZero() && h.internal.Before(st.Floor) {
		return Incoming{}, nil, false // older than the channel
	}
	if e.ours(h.messageID) {
		return Incoming{}, nil, false // our own mail, delivered to this mailbox too
	}
	mine := strings.Contains(strings.ToLower(h.subject), strings.ToLower(e.c.ChamberID))
	for _, id := range append(append([]string{}, h.inReplyTo...), h.references...) {
		if e.ours(id) || threadIDs[id] {
			mine = true
		}
	}
	if !mine {
		return Incoming{}, nil, false
	}
	key := "msgid:" + h.messageID
	if !fallback.ValidMessageID(h.messageID) {
		key = fmt.Sprintf("uid:%d:%d", h.validity, h.uid)
	}
	from := termtext.OneLine(h.from, maxFrom)
	switch {
	case h.auto != "" && h.auto != "no":
		return Incoming{}, &Ignored{Key: key, Reason: fmt.Sprintf("an automatic mail from %s (Auto-Submitted: %s)", from, termtext.OneLine(h.auto, 40))}, false
	case h.precedence == "bulk" || h.precedence == "junk" || h.precedence == "list" || h.precedence == "auto_reply":
		return Incoming{}, &Ignored{Key: key, Reason: fmt.Sprintf("a bulk or automatic mail from %s (Precedence: %s)", from, termtext.OneLine(h.precedence, 40))}, false
	case h.fromCount != 1:
		return Incoming{}, &Ignored{Key: key, Reason: "a mail without exactly one From address"}, false
	case !strings.EqualFold(h.headerFrom, h.from):
		// The envelope is the server's reading, which repairs malformed From lines; a DMARC
		// checker may have read another author in them. Both readings must agree.
		return Incoming{}, &Ignored{Key: key, Reason: fmt.Sprintf("a mail whose From header is not one well-formed address (the server read %s)", from)}, false
	case !allowed(e.c.AllowedSenders, h.from):
		return Incoming{}, &Ignored{Key: key, Reason: fmt.Sprintf("a mail from %s, who is not in allowed_senders", from)}, false
	}
	subject := strings.TrimSpace(h.subject)
	var thread []string
	if fallback.ValidMessageID(h.messageID) {
		thread = append(thread, h.messageID)
		refs := h.references
		if len(refs) > maxReferenceIDs {
			refs = append(refs[:1:1], refs[len(refs)-maxReferenceIDs+1:]...)
		}
		for _, r := range refs {
			if fallback.ValidMessageID(r) {
				thread = append(thread, r)
			}
		}
	}
	return Incoming{Key: key, From: "email:" + from, Subject: termtext.OneLine(subject, maxSubject), Time: h.internal, Thread: thread}, nil, true
}

// body fetches one mail, at most maxRawMail bytes of it.
func (e *email) body(c *imapclient.Client, uid imap.UID) ([]byte, error) {
	section := &imap.FetchItemBodySection{Peek: true, Partial: &imap.SectionPartial{Offset: 0, Size: maxRawMail}}
	cmd := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}})
	var raw []byte
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		for item := msg.Next(); item != nil; item = msg.Next() {
			if it, ok := item.(imapclient.FetchItemDataBodySection); ok && it.Literal != nil {
				b, err := io.ReadAll(io.LimitReader(it.Literal, maxRawMail))
				if err != nil {
					return nil, err
				}
				raw = b
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return nil, err
	}
	return raw, nil
}

// mailBody is the text a person wrote in a mail: its first text/plain part (else its HTML made
// text), without the quoted history, cleaned and bounded; attachments are named, not kept.
func mailBody(raw []byte) string {
	var plain, htmlText string
	var notes []string
	r, err := gomail.CreateReader(bytes.NewReader(raw))
	if r == nil {
		return fmt.Sprintf("(cryochamber could not read this mail: %v)\n", termtext.OneLine(errString(err), 200))
	}
	for parts := 0; parts < maxMailParts; parts++ {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil && !gomessage.IsUnknownCharset(err) {
			notes = append(notes, "part of the mail could not be read: "+termtext.OneLine(err.Error(), 200))
			break
		}
		switch h := p.Header.(type) {
		case *gomail.InlineHeader:
			ct, _, _ := h.ContentType()
			b, _ := io.ReadAll(io.LimitReader(p.Body, maxRawMail))
			switch {
			case ct == "text/plain" && plain == "":
				plain = string(b)
			case ct == "text/html" && htmlText == "":
				htmlText = string(b)
			}
		case *gomail.AttachmentHeader:
			name, _ := h.Filename()
			if name == "" {
				name = "(no name)"
			}
			notes = append(notes, "attachment "+termtext.OneLine(name, 100)+" left out")
		}
	}
	text := plain
	if text == "" && htmlText != "" {
		text = htmlToText(htmlText)
	}
	text = stripQuoted(text)
	if len(notes) > 0 {
		text += "\n\n[" + strings.Join(notes, "; ") + "]"
	}
	return cleanText(text, MaxBody) + "\n"
}

func errString(err error) string {
	if err == nil {
		return "no content"
	}
	return err.Error()
}
