package channel

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

const (
	zulipBot   = "cryo-bot@zulip.com"
	zulipKey   = "zulipAPIkey0123456789abcdef"
	zulipTopic = "garden (cryochamber)"
)

func newZulip(t *testing.T) (*standIn, Channel, ZulipConfig) {
	t.Helper()
	s := newStandIn(t, func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == zulipBot && p == zulipKey
	})
	cfg := ZulipConfig{Site: s.srv.URL, Email: zulipBot, Stream: "agents", Topic: zulipTopic, AllowedUsers: []string{"hamlet@zulip.com"}, Summaries: true}
	c := cfg
	c.APIKey = secret(zulipKey)
	ch, err := NewZulip(c)
	if err != nil {
		t.Fatal(err)
	}
	return s, ch, cfg
}

// narrow is what every fetch of the topic must ask for.
func narrow(sender string) string {
	n := `[{"operand":"agents","operator":"stream"},{"operand":"garden (cryochamber)","operator":"topic"}`
	if sender != "" {
		n += `,{"operand":"` + sender + `","operator":"sender"}`
	}
	return n + "]"
}

func getNewest(fixture string, vars map[string]string, sender string) exchange {
	return exchange{method: "GET", path: "/api/v1/messages", fixture: fixture, vars: vars,
		query: url.Values{"anchor": {"newest"}, "num_before": {"100"}, "num_after": {"0"}, "apply_markdown": {"false"}, "narrow": {narrow(sender)}}}
}

func getAfter(anchor, fixture string) exchange {
	return exchange{method: "GET", path: "/api/v1/messages", fixture: fixture, vars: map[string]string{"anchor": anchor},
		query: url.Values{"anchor": {anchor}, "include_anchor": {"false"}, "num_before": {"0"}, "num_after": {"100"}, "narrow": {narrow("")}}}
}

func sendMessage(id string, check func(t *testing.T, form url.Values)) exchange {
	return exchange{method: "POST", path: "/api/v1/messages", fixture: "zulip/send-message.http", vars: map[string]string{"id": id},
		check: func(t *testing.T, r *http.Request, raw []byte) {
			form, err := url.ParseQuery(string(raw))
			if err != nil || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
				t.Errorf("POST body %q: %v", raw, err)
			}
			if form.Get("type") != "stream" || form.Get("to") != "agents" || form.Get("topic") != zulipTopic {
				t.Errorf("sent to %v", form)
			}
			check(t, form)
		}}
}

// Messages by allowed users in the topic become inbox messages; a stranger's, the bot's own and
// those older than the channel do not; the outbox is posted without any mention that could
// page people; later pages are followed; a message edited before it was read says so.
func TestZulipRoundTrip(t *testing.T) {
	c := newChamber(t)
	s, ch, _ := newZulip(t)
	item := c.outbox(t, t0.Add(-time.Minute), message.KindReply, "agent", "Done. @**all** rejoice, and @_**Iago|5** too.\n")

	s.expect(getNewest("zulip/messages-newest.http", nil, ""),
		sendMessage("42", func(t *testing.T, form url.Values) {
			want := "**Reply from agent (session 2)**\n\nDone. @\u2060**all** rejoice, and @\u2060_**Iago|5** too.\n\n\n_cryochamber · ref " + Ref(c.id, item) + "_"
			if got := form.Get("content"); got != want {
				t.Errorf("content\n%q\nwant\n%q", got, want)
			}
		}))
	r := c.run1(t, ch)
	noErr(t, r)
	if len(r.Pulled) != 2 || len(r.Ignored) != 1 || len(r.Pushed) != 1 {
		t.Fatalf("first sync = %+v", r)
	}
	if !strings.Contains(r.Ignored[0].Reason, "from iago@zulip.com, who is not in allowed_users") {
		t.Errorf("ignored = %+v", r.Ignored)
	}
	in := c.inbox(t)
	m := in[r.Pulled[0]]
	if m == nil || m.From != "zulip:hamlet@zulip.com" || m.Subject != "message in #agents > garden (cryochamber)" ||
		m.Body != "Please water the ferns on Friday. @**all** should know.\n" || !m.Time.Equal(time.Unix(1795425000, 0)) {
		t.Errorf("first = %+v", m)
	}
	if m := in[r.Pulled[1]]; m == nil || m.From != "zulip:Hamlet@Zulip.com" || m.Body != "And the cactus.\n" {
		t.Errorf("second = %+v", m)
	}
	if st := c.stateOf(t, "zulip"); st.Cursor.LastID != 21 || st.Sent[item] != "message:42" {
		t.Errorf("state = %+v", st)
	}

	// Two pages of news, one message edited before it was read.
	c.now = t0.Add(10 * time.Minute)
	s.expect(getAfter("21", "zulip/messages-after-page1.http"), getAfter("43", "zulip/messages-after-page2.http"))
	r = c.run1(t, ch)
	noErr(t, r)
	if len(r.Pulled) != 2 || len(r.Pushed) != 0 {
		t.Fatalf("second sync = %+v", r)
	}
	in = c.inbox(t)
	if m := in[r.Pulled[0]]; m == nil || m.Subject != "message in #agents > garden (cryochamber) (edited before it was read)" || m.Body != "Water them on Saturday instead.\n" {
		t.Errorf("edited = %+v", m)
	}
	// Nothing new.
	s.expect(getAfter("45", "zulip/messages-none.http"))
	r = c.run1(t, ch)
	noErr(t, r)
	if len(r.Pulled)+len(r.Pushed)+len(r.Ignored) != 0 {
		t.Errorf("idle sync = %+v", r)
	}
}

// A 429 with Retry-After (a fraction of seconds) stops the channel that long; a refusal
// (a missing stream, a wrong key) is an error with Zulip's code and words; nothing waits lost.
func TestZulipErrors(t *testing.T) {
	c := newChamber(t)
	s, ch, _ := newZulip(t)
	item := c.outbox(t, t0.Add(-time.Minute), message.KindNotice, "cryochamber", "retrying\n")

	s.expect(getNewest("zulip/messages-newest.http", nil, ""), exchange{method: "POST", path: "/api/v1/messages", fixture: "zulip/rate-limit.http"})
	r := c.run1(t, ch)
	var rl *RateLimited
	if !errors.As(r.Err, &rl) || !rl.Until.Equal(t0.Add(28706807374*time.Nanosecond)) {
		t.Fatalf("rate limited: %v", r.Err)
	}
	c.now = t0.Add(10 * time.Second)
	r = c.run1(t, ch) // still waiting: no request
	if !errors.As(r.Err, &rl) {
		t.Fatalf("before the wait ended: %v", r.Err)
	}
	c.now = t0.Add(30 * time.Second)
	s.expect(getAfter("21", "zulip/messages-none.http"), exchange{method: "POST", path: "/api/v1/messages", fixture: "zulip/stream-missing.http"})
	r = c.run1(t, ch)
	if r.Err == nil || errors.As(r.Err, &rl) || !strings.Contains(r.Err.Error(), "400 Bad Request: STREAM_DOES_NOT_EXIST: Channel 'agents' does not exist") {
		t.Fatalf("missing stream: %v", r.Err)
	}
	c.now = t0.Add(time.Minute)
	s.expect(getAfter("21", "zulip/invalid-key.http"), exchange{method: "POST", path: "/api/v1/messages", fixture: "zulip/invalid-key.http"})
	r = c.run1(t, ch)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "401 Unauthorized: INVALID_API_KEY: Invalid API key") || strings.Contains(r.Err.Error(), zulipKey) {
		t.Fatalf("invalid key: %v", r.Err)
	}
	// Fixed: the notice that waited goes out once.
	c.now = t0.Add(2 * time.Minute)
	s.expect(getAfter("21", "zulip/messages-none.http"), sendMessage("43", func(*testing.T, url.Values) {}))
	r = c.run1(t, ch)
	noErr(t, r)
	if len(r.Pushed) != 1 || r.Pushed[0] != item {
		t.Fatalf("after the errors = %+v", r)
	}
	st, _ := LastSync(c.state)
	if len(st) != 1 || st[0].LastError != "" || st[0].Pushed != 1 {
		t.Errorf("LastSync = %+v", st)
	}
}

// A sync killed after posting and before recording: the next one finds the bot's message by its
// footer and records it.
func TestZulipFindsWhatAKilledSyncPosted(t *testing.T) {
	c := newChamber(t)
	s, ch, cfg := newZulip(t)
	item := c.outbox(t, t0.Add(-time.Minute), message.KindReply, "agent", "posted, then killed\n")
	s.expect(getNewest("zulip/messages-newest.http", nil, ""), sendMessage("50", func(*testing.T, url.Values) {}))
	killedAt(t, childSpec{Dir: c.dir, ID: c.id, State: c.state, Now: t0, KillAt: "sync-pushed", Zulip: &cfg, ZulipKey: zulipKey})
	s.expect(getNewest("zulip/messages-bot.http", map[string]string{"ref": Ref(c.id, item)}, zulipBot), getAfter("21", "zulip/messages-none.http"))
	r := c.run1(t, ch)
	noErr(t, r)
	if len(r.Found) != 1 || len(r.Pushed) != 0 {
		t.Fatalf("sync after the kill = %+v", r)
	}
	if st := c.stateOf(t, "zulip"); st.Sent[item] != "message:50" || st.Pending != nil {
		t.Errorf("state = %+v", st)
	}
	raw, _ := json.Marshal(c.stateOf(t, "zulip"))
	if strings.Contains(string(raw), zulipKey) {
		t.Error("the API key is in the sync state")
	}
}
