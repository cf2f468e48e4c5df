// Package heartbeat talks to an off-machine monitor made for cron jobs, in healthchecks.io's
// conventions, so that a plan whose machine is gone (dead, stolen, switched off for a month) is
// still reported: every alert of cryochamber starts on that machine, a monitor elsewhere does
// not.
//
// Two parts, both optional:
//   - pings (`url`): `URL/start` when a session starts, `URL` when it ends well, `URL/fail`
//     with a one-line reason when it fails;
//   - the management API v3 (`api_url`, `check`, the key): the check's timeout set to the
//     seconds until the next wake after every hibernation (the agent chooses its own schedule,
//     so the monitor is told when to expect the next ping), read back for `validate`, paused
//     when the plan ends.
//
// Every request is bounded (a deadline over all its attempts) and retried briefly: the monitor
// is never a reason for a session or an arming to wait long, or to fail. The package never
// decides when to ping, never reads the clock, the environment or a chamber file, and never
// sends the agent's output (the caller gives a one-line reason).
package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// Kind is a ping: the start of a session, its good end, or its failure.
type Kind string

const (
	Start   Kind = "start"
	Success Kind = "success"
	Fail    Kind = "fail"
)

// Bounds of the monitor's API on a check's timeout and grace (healthchecks.io: 60 s to a
// year, both). A value outside is sent clamped: a wake sooner than a minute away is expected
// at the minute, one more than a year away at a year.
const (
	MinSeconds = 60
	MaxSeconds = 31536000
)

// maxBody bounds the body of a /fail or success ping (healthchecks.io keeps the first 100 kB;
// ours is one line).
const maxBody = 1000

// Client sends pings and API calls. The zero value uses http.DefaultClient's transport with
// the default bounds.
type Client struct {
	HTTP *http.Client
	// Deadline bounds one ping or call over all its attempts (default 3 s).
	Deadline time.Duration
	// Attempts is how many times a request that failed for the network or a 5xx is sent
	// (default 3), a quarter of a second apart.
	Attempts int
}

func (c *Client) deadline() time.Duration {
	if c == nil || c.Deadline <= 0 {
		return 3 * time.Second
	}
	return c.Deadline
}

func (c *Client) attempts() int {
	if c == nil || c.Attempts <= 0 {
		return 3
	}
	return c.Attempts
}

func (c *Client) http() *http.Client {
	if c != nil && c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// CheckURL refuses a ping or API URL that is not http(s) with a host, or that carries a user
// name and password (a secret in cryo.toml, which the agent reads).
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if u.User != nil {
		return fmt.Errorf("%q has a user name in it: credentials never go in cryo.toml", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q has a query or fragment: give the ping URL as the monitor shows it", raw)
	}
	return nil
}

// PingURL is where a ping of kind goes: URL/start, URL, URL/fail.
func PingURL(base string, kind Kind) string {
	base = strings.TrimRight(base, "/")
	switch kind {
	case Start:
		return base + "/start"
	case Fail:
		return base + "/fail"
	}
	return base
}

// Ping sends one ping (a POST, with body as its text: a one-line reason or summary). The
// monitor answers 200 "OK"; anything else is an error naming the answer.
func (c *Client) Ping(ctx context.Context, base string, kind Kind, body string) error {
	body = oneLine(body, maxBody)
	_, err := c.do(ctx, http.MethodPost, PingURL(base, kind), "", "text/plain; charset=utf-8", []byte(body))
	return err
}

// API is a check in the management API v3.
type API struct {
	URL   string // the site root: https://healthchecks.io (or a self-hosted one)
	Key   string // a read-write API key (X-Api-Key)
	Check string // the check's uuid
}

// Check is what the monitor answers about a check (the fields cryochamber reads).
type Check struct {
	Name     string `json:"name"`
	Status   string `json:"status"` // new, up, grace, down, paused, started
	Timeout  int    `json:"timeout"`
	Grace    int    `json:"grace"`
	LastPing string `json:"last_ping"`
	NextPing string `json:"next_ping"`
}

func (a API) endpoint(suffix string) string {
	return strings.TrimRight(a.URL, "/") + "/api/v3/checks/" + url.PathEscape(a.Check) + suffix
}

// SetTimeout sets the check's timeout and grace (seconds, clamped to the API's bounds) and
// returns the check as the monitor then holds it.
func (c *Client) SetTimeout(ctx context.Context, a API, timeout, grace int) (*Check, error) {
	body, _ := json.Marshal(map[string]int{"timeout": Clamp(timeout), "grace": Clamp(grace)})
	return c.check(ctx, a, http.MethodPost, "", body)
}

// Pause pauses the check: the plan has ended, no ping is expected.
func (c *Client) Pause(ctx context.Context, a API) (*Check, error) {
	return c.check(ctx, a, http.MethodPost, "/pause", nil)
}

// Get reads the check back.
func (c *Client) Get(ctx context.Context, a API) (*Check, error) {
	return c.check(ctx, a, http.MethodGet, "", nil)
}

func (c *Client) check(ctx context.Context, a API, method, suffix string, body []byte) (*Check, error) {
	ct := ""
	if body != nil {
		ct = "application/json"
	}
	data, err := c.do(ctx, method, a.endpoint(suffix), a.Key, ct, body)
	if err != nil {
		return nil, err
	}
	var ch Check
	if err := json.Unmarshal(data, &ch); err != nil {
		return nil, fmt.Errorf("the monitor's answer is not a check: %w", err)
	}
	return &ch, nil
}

// Clamp brings seconds within the API's bounds.
func Clamp(secs int) int {
	return min(max(secs, MinSeconds), MaxSeconds)
}

// StatusError is an answer other than 2xx.
type StatusError struct {
	Code int
	Text string // the monitor's error text (its JSON "error", or the body), one line
}

func (e *StatusError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("the monitor answered %d", e.Code)
	}
	return fmt.Sprintf("the monitor answered %d: %s", e.Code, e.Text)
}

// do sends one request, retried on the network or a 5xx within the deadline; a 4xx is final
// (a wrong key, an unknown check: retrying changes nothing).
func (c *Client) do(ctx context.Context, method, target, key, contentType string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.deadline())
	defer cancel()
	var last error
	for i := 0; i < c.attempts(); i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w (gave up after %s)", last, c.deadline())
			case <-time.After(250 * time.Millisecond):
			}
		}
		data, err := c.once(ctx, method, target, key, contentType, body)
		if err == nil {
			return data, nil
		}
		last = err
		var se *StatusError
		if errors.As(err, &se) && se.Code < 500 {
			return nil, err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func (c *Client) once(ctx context.Context, method, target, key, contentType string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	req.Header.Set("User-Agent", "cryochamber")
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, redact(err, target)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &StatusError{Code: resp.StatusCode, Text: errorText(data)}
	}
	return data, nil
}

// redact keeps the error and drops the URL from it: a ping URL is a secret of sorts (anyone
// who has it can ping), and the error is shown in status.
func redact(err error, target string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return errors.New(strings.ReplaceAll(err.Error(), target, "(the monitor)"))
}

func errorText(data []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return oneLine(e.Error, 200)
	}
	return oneLine(string(data), 200)
}

// oneLine joins s into one line of printable text, at most n bytes: the one sanitizer's line
// (no control, C1 included, no format or separator rune, valid UTF-8), cut on a rune boundary.
// The body of a ping carries the agent's summary into the monitor's page and notices.
func oneLine(s string, n int) string {
	s = termtext.OneLine(s, n)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}
