package fallback

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// Webhook defaults and bounds.
const (
	DefaultWebhookTimeout = 10 * time.Second // per attempt
	DefaultWebhookBackoff = time.Second      // before the first retry; doubles
	maxBackoff            = 5 * time.Minute
	maxRetries            = 10
	maxRedirects          = 3
	maxAnswerRead         = 64 << 10 // what we read of an answer, at most
	maxAnswerQuote        = 200      // what of it goes into an error
	maxURLLen             = 2048
)

// Headers of a signed webhook request (see the package doc for how to verify them).
const (
	SignatureHeader = "X-Cryochamber-Signature"
	TimestampHeader = "X-Cryochamber-Timestamp"
)

// WebhookConfig is how to post alerts.
type WebhookConfig struct {
	Timeout time.Duration // per attempt; 0 = DefaultWebhookTimeout
	Retries int           // extra attempts after the first; capped at 10
	Secret  []byte        // HMAC-SHA256 key; nil = no signature
	Backoff time.Duration // first backoff (doubles, capped at 5m); 0 = DefaultWebhookBackoff
	// Client sends the requests; nil = a client with no proxy and no connection reuse. Its
	// redirect policy is always replaced by ours.
	Client *http.Client
}

// payload is the JSON body. Field order is the wire order.
type payload struct {
	Chamber string `json:"chamber"`
	Session int    `json:"session"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Time    string `json:"time"`
	Host    string `json:"host,omitempty"`
	Text    string `json:"text"`
}

// WebhookBody is the exact JSON body PostWebhook sends (and signs) for a.
func WebhookBody(a Alert) ([]byte, error) {
	return json.Marshal(payload{
		Chamber: termtext.OneLine(a.Chamber, maxPathRunes),
		Session: a.Session,
		Reason:  termtext.OneLine(a.Reason, maxReasonRunes),
		Message: sanitizeBody(a.Message, maxMessageBytes),
		Time:    timeText(a.Time),
		Host:    termtext.OneLine(a.Host, maxNameRunes),
		Text:    Text(a),
	})
}

// Sign returns the X-Cryochamber-Signature value for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// errPermanent marks a failure that another attempt would only repeat.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// PostWebhook posts alert a to rawURL, retrying timeouts, connection errors and 5xx answers
// with exponential backoff, until an attempt succeeds, the retries are used up or ctx ends.
func PostWebhook(ctx context.Context, c WebhookConfig, rawURL string, a Alert) error {
	u, err := checkWebhookURL(rawURL)
	if err != nil {
		return err
	}
	where := redactURL(u)
	body, err := WebhookBody(a)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", where, err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultWebhookTimeout
	}
	backoff := c.Backoff
	if backoff <= 0 {
		backoff = DefaultWebhookBackoff
	}
	attempts := 1 + min(max(c.Retries, 0), maxRetries)
	client := webhookClient(c.Client)

	var last error
	for i := 1; i <= attempts; i++ {
		if i > 1 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("webhook %s: %w after %d of %d attempts (last: %v)", where, ctx.Err(), i-1, attempts, last)
			case <-t.C:
			}
			backoff = min(2*backoff, maxBackoff)
		}
		err := post(ctx, client, timeout, u, body, c.Secret, a.Time)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("webhook %s: %w (attempt %d of %d: %v)", where, cerr, i, attempts, err)
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			return fmt.Errorf("webhook %s: %w", where, err)
		}
		last = err
	}
	if attempts == 1 {
		return fmt.Errorf("webhook %s: %w", where, last)
	}
	return fmt.Errorf("webhook %s: failed %d attempts, last: %w", where, attempts, last)
}

// post makes one attempt. Errors that are not worth repeating come back as *permanentError.
func post(ctx context.Context, client *http.Client, timeout time.Duration, u *url.URL, body, secret []byte, at time.Time) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return &permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cryochamber")
	if secret != nil {
		req.Header.Set(SignatureHeader, Sign(secret, body))
		req.Header.Set(TimestampHeader, strconv.FormatInt(at.Unix(), 10))
	}
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error repeats the whole URL, and a webhook URL's path is often its secret.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		var redirect *redirectError
		var unknownCA x509.UnknownAuthorityError
		var hostname x509.HostnameError
		var verify *tls.CertificateVerificationError
		switch {
		case errors.As(err, &redirect), errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &verify):
			return &permanentError{err}
		case actx.Err() != nil && ctx.Err() == nil:
			return fmt.Errorf("no answer within %v", timeout)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The body is not read: closing it unread drops the connection, which is cheaper than
		// reading an answer nobody needs.
		return nil
	}
	// Bounded: a broken or hostile server may answer with gigabytes.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerRead))
	err = fmt.Errorf("status %s%s", resp.Status, quoteAnswer(answer))
	if resp.StatusCode >= 500 {
		return err
	}
	return &permanentError{err}
}

// quoteAnswer turns the start of an answer into one printable line for an error.
func quoteAnswer(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.In(r, unicode.Cf)
	}), " ")
	if s == "" {
		return ""
	}
	if r := []rune(s); len(r) > maxAnswerQuote {
		s = string(r[:maxAnswerQuote]) + "..."
	}
	return ": " + s
}

// checkWebhookURL accepts only absolute http and https URLs with a host.
func checkWebhookURL(raw string) (*url.URL, error) {
	if len(raw) > maxURLLen {
		return nil, fmt.Errorf("webhook URL is longer than %d bytes", maxURLLen)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return nil, fmt.Errorf("webhook URL %q contains a space or control character", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("webhook URL %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("webhook URL %q: scheme %q is not http or https", raw, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("webhook URL %q has no host", raw)
	}
	return u, nil
}

// redactURL names a webhook in errors by scheme and host only: the path and query of an
// incoming-webhook URL are its credential, and errors end up in logs.
func redactURL(u *url.URL) string {
	s := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		s += "/..."
	}
	return s
}

type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

// checkRedirect follows at most maxRedirects redirects, only to http or https, and never from
// https down to http, where the body and its signature would travel in clear.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &redirectError{fmt.Sprintf("stopped after %d redirects", maxRedirects)}
	}
	switch req.URL.Scheme {
	case "https":
	case "http":
		if via[len(via)-1].URL.Scheme == "https" {
			return &redirectError{fmt.Sprintf("refusing a redirect from https to http (%s)", redactURL(req.URL))}
		}
	default:
		return &redirectError{fmt.Sprintf("refusing a redirect to scheme %q", req.URL.Scheme)}
	}
	return nil
}

func webhookClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	} else {
		// No proxy: a package must not read the environment (ProxyFromEnvironment does); a
		// caller that needs one passes a Client. No keep-alive: one alert, one connection.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		tr.DisableKeepAlives = true
		out.Transport = tr
	}
	out.CheckRedirect = checkRedirect
	return &out
}
