package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// ZulipConfig is one topic of one stream that holds a chamber's conversation.
type ZulipConfig struct {
	Site         string                                    // https://example.zulipchat.com
	Email        string                                    // the bot's address (the API's user name)
	APIKey       func(ctx context.Context) (string, error) `json:"-"`
	Stream       string
	Topic        string
	AllowedUsers []string // addresses whose messages reach the agent
	Summaries    bool
	Client       *http.Client `json:"-"`
}

// maxZulipContent is Zulip's limit on a message (10000 bytes).
const maxZulipContent = 10000

type zulip struct {
	c   ZulipConfig
	api *api
	key string
}

// NewZulip returns the Zulip channel.
func NewZulip(c ZulipConfig) (Channel, error) {
	base, err := parseBase(c.Site)
	if err != nil {
		return nil, fmt.Errorf("zulip site: %w", err)
	}
	if c.Stream == "" || c.Topic == "" || c.Email == "" {
		return nil, fmt.Errorf("zulip: a stream, a topic and the bot's email are needed")
	}
	if c.Client == nil {
		c.Client = newHTTPClient()
	}
	return &zulip{c: c, api: &api{service: "Zulip", base: base, client: c.Client, limited: zulipLimited, errText: zulipErrText}}, nil
}

func (z *zulip) Name() string    { return "zulip" }
func (z *zulip) Summaries() bool { return z.c.Summaries }

func (z *zulip) where() string { return "#" + z.c.Stream + " > " + z.c.Topic }

func (z *zulip) request(ctx context.Context, method, u string, form url.Values) (*http.Request, error) {
	if z.key == "" {
		k, err := z.c.APIKey(ctx)
		if err != nil {
			return nil, err
		}
		if err := validToken("the Zulip API key", k); err != nil {
			return nil, err
		}
		z.key = k
	}
	var r io.Reader
	if form != nil {
		r = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(z.c.Email, z.key)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return req, nil
}

// zMessage is the part of a message we read (https://zulip.com/api/get-messages).
type zMessage struct {
	ID                int64  `json:"id"`
	SenderEmail       string `json:"sender_email"`
	SenderID          int64  `json:"sender_id"`
	Content           string `json:"content"`
	Subject           string `json:"subject"`
	Timestamp         int64  `json:"timestamp"`
	LastEditTimestamp int64  `json:"last_edit_timestamp"`
}

type zMessages struct {
	Result      string     `json:"result"`
	FoundNewest bool       `json:"found_newest"`
	Messages    []zMessage `json:"messages"`
}

// narrow is the stream and topic (and, for Find, the sender). "stream" rather than "channel":
// every Zulip version knows it.
func (z *zulip) narrow(sender string) string {
	n := []map[string]string{{"operator": "stream", "operand": z.c.Stream}, {"operator": "topic", "operand": z.c.Topic}}
	if sender != "" {
		n = append(n, map[string]string{"operator": "sender", "operand": sender})
	}
	b, _ := json.Marshal(n)
	return string(b)
}

func (z *zulip) get(ctx context.Context, q url.Values, now time.Time) (*zMessages, error) {
	q.Set("apply_markdown", "false")
	q.Set("client_gravatar", "true")
	req, err := z.request(ctx, http.MethodGet, z.api.url("/api/v1/messages", q), nil)
	if err != nil {
		return nil, err
	}
	_, body, err := z.api.do(ctx, req, now)
	if err != nil {
		return nil, err
	}
	var m zMessages
	if err := decode(body, &m, "the messages of "+z.where()); err != nil {
		return nil, err
	}
	if m.Result != "success" {
		return nil, fmt.Errorf("the messages of %s: result %q", z.where(), termtext.OneLine(m.Result, 40))
	}
	return &m, nil
}

func (z *zulip) Pull(ctx context.Context, st *State, now time.Time) (*Pulled, error) {
	p := &Pulled{Cursor: st.Cursor}
	var list []zMessage
	first := st.Cursor.LastID == 0
	if first {
		// The topic's recent history, of which the last Lookback counts.
		m, err := z.get(ctx, url.Values{"anchor": {"newest"}, "num_before": {"100"}, "num_after": {"0"}, "narrow": {z.narrow("")}}, now)
		if err != nil {
			return nil, err
		}
		list = m.Messages
	} else {
		anchor := st.Cursor.LastID
		done := false
		for page := 0; page < maxPages && !done; page++ {
			m, err := z.get(ctx, url.Values{"anchor": {strconv.FormatInt(anchor, 10)}, "include_anchor": {"false"},
				"num_before": {"0"}, "num_after": {"100"}, "narrow": {z.narrow("")}}, now)
			if err != nil {
				return nil, err
			}
			list = append(list, m.Messages...)
			done = m.FoundNewest || len(m.Messages) == 0
			for _, msg := range m.Messages {
				if msg.ID > anchor {
					anchor = msg.ID
				}
			}
		}
		if !done {
			p.Warnings = append(p.Warnings, fmt.Sprintf("zulip: more than %d pages of messages: the rest is read at the next poll", maxPages))
		}
	}
	for _, m := range list {
		if m.ID <= st.Cursor.LastID {
			continue // the anchor itself, on servers older than include_anchor
		}
		if m.ID > p.Cursor.LastID {
			p.Cursor.LastID = m.ID
		}
		at := time.Unix(m.Timestamp, 0).UTC()
		if first && at.Before(st.Floor) {
			continue
		}
		if strings.EqualFold(m.SenderEmail, z.c.Email) {
			continue // ours
		}
		key := "message:" + strconv.FormatInt(m.ID, 10)
		if !allowed(z.c.AllowedUsers, m.SenderEmail) {
			p.Ignored = append(p.Ignored, Ignored{Key: key, Reason: fmt.Sprintf("a message in %s from %s, who is not in allowed_users", z.where(), termtext.OneLine(m.SenderEmail, 100))})
			continue
		}
		if w := pin(st, "zulip:"+strings.ToLower(m.SenderEmail), strconv.FormatInt(m.SenderID, 10)); w != "" {
			p.Ignored = append(p.Ignored, Ignored{Key: key, Reason: "a message from " + termtext.OneLine(m.SenderEmail, 100) + ": " + w})
			p.Warnings = append(p.Warnings, "zulip: "+termtext.OneLine(m.SenderEmail, 100)+": "+w)
			continue
		}
		subject := "message in " + z.where()
		if m.LastEditTimestamp != 0 {
			subject += " (edited before it was read)"
		}
		p.Messages = append(p.Messages, Incoming{
			Key: key, From: "zulip:" + termtext.OneLine(m.SenderEmail, 100), Subject: termtext.OneLine(subject, maxSubject), Time: at,
			Body: cleanText(m.Content, MaxBody),
		})
	}
	return p, nil
}

func zulipFooter(ref string) string { return "_cryochamber · ref " + ref + "_" }

func (z *zulip) Push(ctx context.Context, st *State, out Outgoing, now time.Time) (string, error) {
	footer := zulipFooter(out.Ref)
	text := "**" + neutralizeZulip(strings.ReplaceAll(headline(out), "*", `\*`)) + "**\n\n" + neutralizeZulip(cleanText(out.Body, MaxBody))
	text = cutBytes(text, maxZulipContent-len(footer)-2, "\n\n[cut by cryochamber: the whole text is in messages/outbox/"+out.ID+".md]")
	form := url.Values{"type": {"stream"}, "to": {z.c.Stream}, "topic": {z.c.Topic}, "content": {text + "\n\n" + footer}}
	req, err := z.request(ctx, http.MethodPost, z.api.url("/api/v1/messages", nil), form)
	if err != nil {
		return "", err
	}
	_, body, err := z.api.do(ctx, req, now)
	if err != nil {
		return "", err
	}
	var r struct {
		Result string `json:"result"`
		ID     int64  `json:"id"`
	}
	if err := decode(body, &r, "the sent message"); err != nil {
		return "", err
	}
	if r.Result != "success" || r.ID == 0 {
		return "", fmt.Errorf("send to %s: result %q", z.where(), termtext.OneLine(r.Result, 40))
	}
	return "message:" + strconv.FormatInt(r.ID, 10), nil
}

func (z *zulip) Find(ctx context.Context, st *State, out Outgoing, now time.Time) (string, bool, error) {
	m, err := z.get(ctx, url.Values{"anchor": {"newest"}, "num_before": {"100"}, "num_after": {"0"}, "narrow": {z.narrow(z.c.Email)}}, now)
	if err != nil {
		return "", false, err
	}
	footer := zulipFooter(out.Ref)
	for _, msg := range m.Messages {
		if strings.Contains(msg.Content, footer) {
			return "message:" + strconv.FormatInt(msg.ID, 10), true, nil
		}
	}
	return "", false, nil
}

// zulipLimited reads Zulip's rate limit answer (https://zulip.com/api/rest-error-handling#rate-limit-exceeded):
// HTTP 429, code RATE_LIMIT_HIT, the wait in seconds (a fraction) in the Retry-After header and
// the "retry-after" field.
func zulipLimited(resp *http.Response, body []byte, now time.Time) *RateLimited {
	if resp.StatusCode != http.StatusTooManyRequests {
		return nil
	}
	if d, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
		return &RateLimited{Service: "Zulip", Until: now.Add(d), Why: "Retry-After: " + resp.Header.Get("Retry-After")}
	}
	var e struct {
		RetryAfter float64 `json:"retry-after"`
	}
	if json.Unmarshal(body, &e) == nil && e.RetryAfter > 0 && e.RetryAfter < 24*3600 {
		return &RateLimited{Service: "Zulip", Until: now.Add(time.Duration(e.RetryAfter * float64(time.Second))), Why: "retry-after in the answer"}
	}
	return &RateLimited{Service: "Zulip", Until: now.Add(time.Minute), Why: "HTTP 429 without a wait"}
}

func zulipErrText(body []byte) string {
	var e struct {
		Msg  string `json:"msg"`
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &e)
	if e.Code != "" {
		return e.Code + ": " + e.Msg
	}
	return e.Msg
}
