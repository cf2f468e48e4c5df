package channel

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

const ghToken = "ghp_TestToken0123456789"

const commentsPath = "/repos/octocat/Hello-World/issues/7/comments"

func newGitHub(t *testing.T) (*standIn, Channel) {
	t.Helper()
	s := newStandIn(t, func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer "+ghToken &&
			r.Header.Get("Accept") == "application/vnd.github+json" && r.Header.Get("X-GitHub-Api-Version") == githubVersion
	})
	ch, err := NewGitHub(GitHubConfig{APIURL: s.srv.URL, Repo: "octocat/Hello-World", Issue: 7, AllowedUsers: []string{"octocat"}, Token: secret(ghToken), Summaries: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, ch
}

func listFirst(since string) exchange {
	return exchange{method: "GET", path: commentsPath, query: url.Values{"since": {since}, "per_page": {"100"}}, fixture: "github/comments-page1.http"}
}

var listPage2 = exchange{method: "GET", path: "/repositories/1296269/issues/7/comments", query: url.Values{"page": {"2"}}, fixture: "github/comments-page2.http"}

// postComment expects a new comment and checks what it says.
func postComment(id string, check func(t *testing.T, body string)) exchange {
	return exchange{method: "POST", path: commentsPath, fixture: "github/create-comment.http", vars: map[string]string{"id": id},
		check: func(t *testing.T, r *http.Request, raw []byte) {
			var b struct {
				Body string `json:"body"`
			}
			if err := json.Unmarshal(raw, &b); err != nil || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("POST body %q: %v", raw, err)
			}
			check(t, b.Body)
		}}
}

// Comments by allowed users, over two pages, become inbox messages; a stranger's comment and
// our own are not; the outbox and the latest session's summary are posted as comments that
// cannot mention anyone; then an edited comment is ignored (not a new message), a deleted one
// changes nothing, and a sync with nothing new asks only for what changed.
func TestGitHubRoundTrip(t *testing.T) {
	c := newChamber(t)
	s, ch := newGitHub(t)
	item := c.outbox(t, t0.Add(-time.Hour), message.KindReply, "agent", "Done. Thanks @octocat and @org/team!\n")
	sum := &Summary{Session: 2, Exit: 0, Text: "watered the ferns", End: t0.Add(-30 * time.Minute)}

	s.expect(listFirst("2026-11-22T10:00:00Z"), listPage2,
		postComment("201", func(t *testing.T, body string) {
			if !strings.HasPrefix(body, "**Reply from agent (session 2)**\n\nDone. Thanks @\u2060octocat and @\u2060org/team!\n") ||
				!strings.HasSuffix(body, "\n\n<!-- cryochamber:"+Ref(c.id, item)+" -->") {
				t.Errorf("comment body %q", body)
			}
		}),
		postComment("202", func(t *testing.T, body string) {
			if !strings.HasPrefix(body, "**Session 2 ended (exit 0)**\n\nwatered the ferns") || !strings.Contains(body, Ref(c.id, "session-2")) {
				t.Errorf("summary body %q", body)
			}
		}))
	res, err := Run(t.Context(), Options{Dir: c.dir, ID: c.id, StateDir: c.state, Channels: []Channel{ch}, Summary: sum, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	noErr(t, r)
	if len(r.Pulled) != 2 || len(r.Ignored) != 1 || len(r.Pushed) != 2 || r.Pushed[0] != item || r.Pushed[1] != "session-2" {
		t.Fatalf("first sync = %+v", r)
	}
	if !strings.Contains(r.Ignored[0].Reason, "by hubot, who is not in allowed_users") {
		t.Errorf("ignored: %+v", r.Ignored)
	}
	in := c.inbox(t)
	first, second := in[r.Pulled[0]], in[r.Pulled[1]]
	if first == nil || first.From != "github:octocat" || first.Subject != "comment on octocat/Hello-World#7" ||
		first.Body != "Please water the ferns on Friday.\n\n@hubot will not do it.\n" || !first.Time.Equal(time.Date(2026, 11, 23, 9, 10, 0, 0, time.UTC)) {
		t.Errorf("first = %+v", first)
	}
	if second == nil || second.From != "github:Octocat" || second.Body != "And the cactus, once a month.\n" {
		t.Errorf("second = %+v", second)
	}
	for _, m := range in {
		if strings.Contains(m.Body, "curl") || strings.Contains(m.Body, "ferns are planted") {
			t.Errorf("a stranger's or our own comment reached the inbox: %+v", m)
		}
	}

	// Later: comment 101 was edited, 104 deleted; our comment 201 is listed. An edit is not a
	// new message from the comment's author (issue 22): a collaborator with write access may
	// edit anyone's comment, and the REST API still names the author. It is ignored, once,
	// with the reason, and the inbox keeps the comment as it was pulled.
	s.expect(exchange{method: "GET", path: commentsPath, query: url.Values{"since": {"2026-11-23T09:20:00Z"}}, fixture: "github/comments-edited.http"})
	c.now = t0.Add(time.Hour)
	r = c.run1(t, ch)
	noErr(t, r)
	if len(r.Pulled) != 0 || len(r.Pushed) != 0 || len(r.Ignored) != 1 || !strings.Contains(r.Ignored[0].Reason, "an edit of a comment") {
		t.Fatalf("second sync = %+v", r)
	}
	if len(c.inbox(t)) != 2 {
		t.Errorf("inbox holds %d messages, want 2 (the edit is not one)", len(c.inbox(t)))
	}
	for _, m := range c.inbox(t) {
		if strings.Contains(m.Body, "Saturday") {
			t.Errorf("the edited text reached the inbox: %+v", m)
		}
	}

	// Nothing new: the same list again changes nothing.
	s.expect(exchange{method: "GET", path: commentsPath, query: url.Values{"since": {"2026-11-23T10:30:00Z"}}, fixture: "github/comments-edited.http"})
	r = c.run1(t, ch)
	noErr(t, r)
	if len(r.Pulled)+len(r.Pushed)+len(r.Ignored) != 0 {
		t.Errorf("idle sync = %+v", r)
	}
}

// Rate limits: a 403 with x-ratelimit-remaining 0 stops the channel until x-ratelimit-reset
// (no request at all before then, and the error says until when); a 429 with retry-after
// waits that long; a 403 that is a refusal is an error, not a wait. Nothing in the outbox is
// lost meanwhile.
func TestGitHubRateLimits(t *testing.T) {
	c := newChamber(t)
	s, ch := newGitHub(t)
	item := c.outbox(t, t0.Add(-time.Minute), message.KindReply, "agent", "hi\n")

	s.expect(exchange{method: "GET", path: commentsPath, fixture: "github/rate-limit-primary.http"})
	r := c.run1(t, ch)
	var rl *RateLimited
	if !errors.As(r.Err, &rl) || !rl.Until.Equal(time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC)) ||
		!strings.Contains(r.Err.Error(), "waiting until 2026-11-23T11:00:00Z (x-ratelimit-remaining: 0)") {
		t.Fatalf("rate limited sync: %v", r.Err)
	}
	if len(r.Pushed) != 0 {
		t.Fatalf("published while rate limited: %+v", r)
	}
	// Before the reset: not a single request (the stand-in fails on any).
	c.now = t0.Add(30 * time.Minute)
	r = c.run1(t, ch)
	if !errors.As(r.Err, &rl) || !r.Waiting.Equal(rl.Until) {
		t.Fatalf("sync before the reset: %+v", r)
	}
	st, _ := LastSync(c.state)
	if len(st) != 1 || !strings.Contains(st[0].LastError, "rate limit") || !st[0].RetryAfter.Equal(rl.Until) {
		t.Errorf("LastSync = %+v", st)
	}

	// After the reset: a secondary limit on the POST.
	c.now = time.Date(2026, 11, 23, 11, 0, 5, 0, time.UTC)
	s.expect(exchange{method: "GET", path: commentsPath, fixture: "github/comments-edited.http"},
		exchange{method: "POST", path: commentsPath, fixture: "github/rate-limit-secondary.http"})
	r = c.run1(t, ch)
	if !errors.As(r.Err, &rl) || !rl.Until.Equal(c.now.Add(60*time.Second)) || !strings.Contains(r.Err.Error(), "retry-after: 60") {
		t.Fatalf("secondary limit: %v", r.Err)
	}
	// A refusal after that minute.
	c.now = c.now.Add(2 * time.Minute)
	s.expect(exchange{method: "GET", path: commentsPath, fixture: "github/comments-edited.http"},
		exchange{method: "POST", path: commentsPath, fixture: "github/forbidden.http"})
	r = c.run1(t, ch)
	if r.Err == nil || errors.As(r.Err, &rl) || !strings.Contains(r.Err.Error(), "403 Forbidden: Resource not accessible by personal access token") {
		t.Fatalf("forbidden: %v", r.Err)
	}
	// Permission fixed: the item that waited is published once.
	c.now = c.now.Add(5 * time.Minute)
	s.expect(exchange{method: "GET", path: commentsPath, fixture: "github/comments-edited.http"}, postComment("202", func(*testing.T, string) {}))
	r = c.run1(t, ch)
	noErr(t, r)
	if len(r.Pushed) != 1 || r.Pushed[0] != item {
		t.Fatalf("after the limits: %+v", r)
	}
}

// A next page on another host is not followed: the token never leaves the API's host.
func TestGitHubForeignNextPage(t *testing.T) {
	c := newChamber(t)
	s, ch := newGitHub(t)
	s.expect(exchange{method: "GET", path: commentsPath, fixture: "github/comments-foreign-next.http"})
	r := c.run1(t, ch)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "the next page of octocat/Hello-World#7 is on another host (https://evil.example/") {
		t.Fatalf("err = %v", r.Err)
	}
}

// A sync killed after posting a comment and before recording it: the next one finds the comment
// by its marker and records it instead of posting it again.
func TestGitHubFindsWhatAKilledSyncPosted(t *testing.T) {
	c := newChamber(t)
	s, ch := newGitHub(t)
	item := c.outbox(t, t0.Add(-time.Minute), message.KindReply, "agent", "posted, then killed\n")
	s.expect(listFirst("2026-11-22T10:00:00Z"), listPage2, postComment("301", func(*testing.T, string) {}))
	killedAt(t, childSpec{Dir: c.dir, ID: c.id, State: c.state, Now: t0, KillAt: "sync-pushed",
		GitHub: &GitHubConfig{APIURL: s.srv.URL, Repo: "octocat/Hello-World", Issue: 7, AllowedUsers: []string{"octocat"}}, GitHubToken: ghToken})
	if st := c.stateOf(t, "github"); st.Pending == nil || st.Pending.ID != item {
		t.Fatalf("pending after the kill: %+v", st.Pending)
	}
	c.now = t0.Add(5 * time.Minute)
	s.expect(
		exchange{method: "GET", path: commentsPath, query: url.Values{"since": {"2026-11-23T09:50:00Z"}}, fixture: "github/comments-marker.http", vars: map[string]string{"ref": Ref(c.id, item)}},
		exchange{method: "GET", path: commentsPath, query: url.Values{"since": {"2026-11-23T09:20:00Z"}}, fixture: "github/comments-marker.http", vars: map[string]string{"ref": Ref(c.id, item)}})
	r := c.run1(t, ch)
	noErr(t, r)
	if len(r.Found) != 1 || r.Found[0] != item || len(r.Pushed) != 0 || len(r.Pulled) != 0 {
		t.Fatalf("sync after the kill = %+v", r)
	}
	if st := c.stateOf(t, "github"); st.Pending != nil || st.Sent[item] != "comment:301" {
		t.Errorf("state = %+v", st)
	}
}

// A login that now belongs to another account is refused and reported.
func TestGitHubRenamedLogin(t *testing.T) {
	c := newChamber(t)
	s, ch := newGitHub(t)
	s.expect(listFirst("2026-11-22T10:00:00Z"), listPage2)
	noErr(t, c.run1(t, ch))
	s.expect(exchange{method: "GET", path: commentsPath, fixture: "github/comments-renamed.http"})
	r := c.run1(t, ch)
	noErr(t, r)
	if len(r.Pulled) != 0 || len(r.Ignored) != 1 || len(r.Warnings) != 1 ||
		!strings.Contains(r.Warnings[0], "belonged to account 1 when it was first accepted and now belongs to account 999") {
		t.Fatalf("sync = %+v", r)
	}
}

// A token that cannot travel in a header fails the channel before any request.
func TestGitHubBadToken(t *testing.T) {
	c := newChamber(t)
	s := newStandIn(t, func(*http.Request) bool { return true })
	ch, err := NewGitHub(GitHubConfig{APIURL: s.srv.URL, Repo: "a/b", Issue: 1, AllowedUsers: []string{"a"}, Token: secret("tok\r\nX-Evil: 1")})
	if err != nil {
		t.Fatal(err)
	}
	r := c.run1(t, ch)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "the GitHub token contains a space, a control or a non-ASCII character") || strings.Contains(r.Err.Error(), "X-Evil") {
		t.Fatalf("err = %v", r.Err)
	}
	if _, err := NewGitHub(GitHubConfig{APIURL: "http://api.github.com", Repo: "a/b", Issue: 1}); err == nil {
		t.Error("plain http to a remote host was accepted")
	}
}

// A flood of comments (here 1,050 by a stranger, more than one pull's 10 pages) must not
// silence the allowed users: the next poll goes on from the page where the last one stopped,
// not from the first page again. The service is generated here in the shape of the recorded
// answers (pages of 100, a Link header with rel="next"); only its size matters.
func TestGitHubFloodDoesNotStall(t *testing.T) {
	const strangers = 1050
	var pages []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page == 0 {
			page = 1
		}
		pages = append(pages, page)
		type user struct {
			Login string `json:"login"`
			ID    int64  `json:"id"`
		}
		since, _ := time.Parse(time.RFC3339, r.URL.Query().Get("since"))
		var all []map[string]any // the comments updated at or after since, oldest first
		for i := 0; i <= strangers; i++ {
			login, uid, body := "spammer", int64(666), "spam "+strconv.Itoa(i)
			if i == strangers {
				login, uid, body = "octocat", 1, "Please pause the plan."
			}
			at := t0.Add(-time.Hour).Add(time.Duration(i) * time.Second)
			if !at.Before(since) {
				all = append(all, map[string]any{"id": 1000 + i, "body": body, "user": user{login, uid}, "created_at": at.Format(time.RFC3339), "updated_at": at.Format(time.RFC3339)})
			}
		}
		list := all[min((page-1)*100, len(all)):min(page*100, len(all))]
		if page*100 < len(all) {
			q := r.URL.Query()
			q.Set("page", strconv.Itoa(page+1))
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?%s>; rel="next"`, r.Host, r.URL.Path, q.Encode()))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	defer srv.Close()
	ch, err := NewGitHub(GitHubConfig{APIURL: srv.URL, Repo: "o/r", Issue: 1, AllowedUsers: []string{"octocat"}, Token: secret(ghToken)})
	if err != nil {
		t.Fatal(err)
	}
	c := newChamber(t)
	r := c.run1(t, ch)
	if r.Err != nil || len(r.Pulled) != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "the rest is read at the next poll") {
		t.Fatalf("first sync: %+v", r)
	}
	c.now = t0.Add(5 * time.Minute)
	pages = nil
	r = c.run1(t, ch)
	if r.Err != nil || len(r.Pulled) != 1 {
		t.Fatalf("second sync pulled %d, want octocat's comment: %+v", len(r.Pulled), r)
	}
	if len(pages) != 1 || pages[0] != 11 {
		t.Errorf("the second sync read pages %v, want [11]", pages)
	}
	if m := c.inbox(t)[r.Pulled[0]]; m == nil || m.Body != "Please pause the plan.\n" {
		t.Errorf("pulled %+v", m)
	}
	// Caught up: the next poll starts from the latest comment read, on page 1.
	c.now = t0.Add(10 * time.Minute)
	pages = nil
	r = c.run1(t, ch)
	if r.Err != nil || len(r.Pulled) != 0 || len(pages) != 1 || pages[0] != 1 {
		t.Errorf("third sync: pages %v, %+v", pages, r)
	}
	if st := c.stateOf(t, "github"); !st.Cursor.Since.Equal(t0.Add(-time.Hour).Add(strangers*time.Second)) || st.Cursor.Next != "" {
		t.Errorf("cursor after catching up: %+v", st.Cursor)
	}
}
