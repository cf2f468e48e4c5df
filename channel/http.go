package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// Bounds of one HTTP exchange with a service.
const (
	maxResponse    = 8 << 20 // a page of 100 comments is far less
	requestTimeout = 30 * time.Second
	maxPages       = 10 // pages followed in one pull; the rest waits for the next poll
)

// newHTTPClient is the client of a service: bounded in time, and it follows a redirect only on
// the same host (a token must never be sent anywhere else).
func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: requestTimeout,
			MaxIdleConns:          2,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: sameHostRedirect,
	}
}

func sameHostRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("too many redirects")
	}
	if req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
		return fmt.Errorf("refusing a redirect to another host (%s)", req.URL.Host)
	}
	return nil
}

// api is one REST service.
type api struct {
	service string // for messages: "GitHub", "Zulip"
	base    *url.URL
	client  *http.Client
	// limited maps a response to the rate limit it announces (nil: none). now is the time
	// the request was made.
	limited func(resp *http.Response, body []byte, now time.Time) *RateLimited
	// errText finds the service's own words in an error body.
	errText func(body []byte) string
}

// parseBase checks a service's base URL: https, or http on this machine only.
func parseBase(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not a URL", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); !(strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()) {
			return nil, fmt.Errorf("%q is not https: the token would cross the network in clear", s)
		}
	default:
		return nil, fmt.Errorf("%q is not an https URL", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q must not carry a user, a query or a fragment", s)
	}
	return u, nil
}

// url joins a path (already escaped where needed) and a query to the base.
func (a *api) url(path string, q url.Values) string {
	u := *a.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = q.Encode()
	return u.String()
}

// sameOrigin reports whether u is on the service's own scheme and host: a pagination link
// elsewhere is never followed (the token would go with it).
func (a *api) sameOrigin(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Scheme == a.base.Scheme && p.Host == a.base.Host
}

// do sends one request and reads at most maxResponse bytes of the answer. A status other than
// 2xx is an error naming the service's message; a rate limit is a *RateLimited.
func (a *api) do(ctx context.Context, req *http.Request, now time.Time) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req = req.WithContext(ctx)
	req.Header.Set("User-Agent", "cryochamber")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: reading the answer: %w", req.Method, req.URL.Path, err)
	}
	if len(body) > maxResponse {
		return nil, nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", req.Method, req.URL.Path, maxResponse)
	}
	if rl := a.limited(resp, body, now); rl != nil {
		return nil, nil, rl
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := termtext.OneLine(a.errText(body), 300)
		if msg == "" {
			msg = "no explanation"
		}
		return nil, nil, &statusError{fmt.Sprintf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, msg)}
	}
	return resp, body, nil
}

// statusError is a service's answer other than 2xx: the request was refused, not carried out.
type statusError struct{ msg string }

func (e *statusError) Error() string { return e.msg }
func (e *statusError) refused()      {}

// refusal is an error that proves the service did not carry the request out (it answered
// no), as opposed to a request whose fate is unknown (a timeout, a dropped connection).
type refusal interface{ refused() }

func isRefusal(err error) bool {
	var r refusal
	return errors.As(err, &r)
}

// unwrapURLError drops the URL from a transport error (it is in our message already).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decode reads a JSON answer.
func decode(body []byte, v any, what string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: not the JSON expected: %w", what, err)
	}
	return nil
}

// nextLink finds rel="next" in a Link header (RFC 8288), as GitHub paginates.
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		segs := strings.Split(part, ";")
		if len(segs) < 2 {
			continue
		}
		target := strings.TrimSpace(segs[0])
		if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
			continue
		}
		for _, p := range segs[1:] {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "rel") {
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target[1 : len(target)-1]
					}
				}
			}
		}
	}
	return ""
}

// retryAfter reads a Retry-After header in seconds (Zulip sends fractions); false when absent
// or not a number of seconds (an HTTP date is not used by these services).
func retryAfter(h string) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(h, 64)
	if err != nil || f < 0 || f > 24*3600 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// validToken refuses a secret that cannot travel in a header as given (a newline from a
// password command, for example).
func validToken(what, tok string) error {
	if tok == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] >= 0x7f {
			return fmt.Errorf("%s contains a space, a control or a non-ASCII character", what)
		}
	}
	return nil
}
