package channel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// GitHubConfig is one issue that holds a chamber's conversation.
type GitHubConfig struct {
	APIURL       string // https://api.github.com, or a GitHub Enterprise API
	Repo         string // owner/name
	Issue        int
	AllowedUsers []string // logins whose comments reach the agent
	// Token resolves the token when the channel first needs it (from the environment or a
	// command): a token that cannot be had fails this channel only.
	Token     func(ctx context.Context) (string, error) `json:"-"`
	Summaries bool
	Client    *http.Client `json:"-"` // nil: a client with timeouts that never leaves the API's host
}

// maxGitHubBody is GitHub's limit on a comment (65536 characters); bytes are counted here, which
// is stricter.
const maxGitHubBody = 65536

// githubVersion is the REST API version the requests ask for.
const githubVersion = "2022-11-28"

type github struct {
	c     GitHubConfig
	api   *api
	token string
}

// NewGitHub returns the GitHub channel.
func NewGitHub(c GitHubConfig) (Channel, error) {
	base, err := parseBase(c.APIURL)
	if err != nil {
		return nil, fmt.Errorf("github api_url: %w", err)
	}
	if c.Repo == "" || strings.Count(c.Repo, "/") != 1 || c.Issue <= 0 {
		return nil, fmt.Errorf("github: repo %q issue %d is not an issue", c.Repo, c.Issue)
	}
	if c.Client == nil {
		c.Client = newHTTPClient()
	}
	return &github{c: c, api: &api{service: "GitHub", base: base, client: c.Client, limited: githubLimited, errText: githubErrText}}, nil
}

func (g *github) Name() string    { return "github" }
func (g *github) Summaries() bool { return g.c.Summaries }

func (g *github) where() string { return g.c.Repo + "#" + strconv.Itoa(g.c.Issue) }

func (g *github) commentsPath() string {
	owner, repo, _ := strings.Cut(g.c.Repo, "/")
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/issues/" + strconv.Itoa(g.c.Issue) + "/comments"
}

// ghComment is the part of an issue comment we read
// (https://docs.github.com/en/rest/issues/comments#list-issue-comments).
type ghComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User *struct {
		Login string `json:"login"`
		ID    int64  `json:"id"`
	} `json:"user"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (g *github) request(ctx context.Context, method, u string, body []byte) (*http.Request, error) {
	if g.token == "" {
		tok, err := g.c.Token(ctx)
		if err != nil {
			return nil, err
		}
		if err := validToken("the GitHub token", tok); err != nil {
			return nil, err
		}
		g.token = tok
	}
	var r io.Reader // a nil *bytes.Reader in an io.Reader would not be nil
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", githubVersion)
	req.Header.Set("Authorization", "Bearer "+g.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// comments lists the issue's comments updated at or after since, following the pages from
// from (the first page when ""); next is the page left for the next poll ("" when the list is
// complete).
func (g *github) comments(ctx context.Context, since time.Time, from string, now time.Time) (list []ghComment, next string, err error) {
	next = from
	if next == "" {
		q := url.Values{"per_page": {"100"}}
		if !since.IsZero() {
			q.Set("since", since.UTC().Format(time.RFC3339))
		}
		next = g.api.url(g.commentsPath(), q)
	} else if !g.api.sameOrigin(next) {
		return nil, "", fmt.Errorf("the page recorded for %s is on another host (%s): not followed", g.where(), termtext.OneLine(next, 100))
	}
	for page := 0; page < maxPages; page++ {
		req, err := g.request(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, "", err
		}
		resp, body, err := g.api.do(ctx, req, now)
		if err != nil {
			return nil, "", err
		}
		var cs []ghComment
		if err := decode(body, &cs, "the comments of "+g.where()); err != nil {
			return nil, "", err
		}
		list = append(list, cs...)
		next = nextLink(resp.Header.Get("Link"))
		if next == "" {
			return list, "", nil
		}
		if !g.api.sameOrigin(next) {
			return nil, "", fmt.Errorf("the next page of %s is on another host (%s): not followed", g.where(), termtext.OneLine(next, 100))
		}
	}
	return list, next, nil
}

const githubMarker = "<!-- cryochamber:"

func githubMarkerOf(ref string) string { return githubMarker + ref + " -->" }

func (g *github) Pull(ctx context.Context, st *State, now time.Time) (*Pulled, error) {
	since := st.Cursor.Since
	if since.IsZero() {
		since = st.Floor
	}
	// A pull cut short goes on where it stopped: reading the first pages again would never get
	// past a flood of comments. The pages keep their order (oldest first) and a comment read
	// twice at a page's edge is recognized by its key.
	list, next, err := g.comments(ctx, since, st.Cursor.Next, now)
	if err != nil {
		return nil, err
	}
	ours := map[string]bool{}
	for _, remote := range st.Sent {
		ours[remote] = true
	}
	p := &Pulled{Cursor: st.Cursor}
	latest := st.Cursor.Since
	if st.Cursor.Latest.After(latest) {
		latest = st.Cursor.Latest
	}
	for _, c := range list {
		if c.UpdatedAt.After(latest) {
			latest = c.UpdatedAt
		}
		if c.User == nil || ours["comment:"+strconv.FormatInt(c.ID, 10)] || strings.Contains(c.Body, githubMarker) {
			continue // a deleted account's comment, or one of ours
		}
		sum := sha256.Sum256([]byte(c.Body))
		key := "comment:" + strconv.FormatInt(c.ID, 10) + "@" + hex.EncodeToString(sum[:6])
		login := c.User.Login
		if !allowed(g.c.AllowedUsers, login) {
			p.Ignored = append(p.Ignored, Ignored{Key: key, Reason: fmt.Sprintf("a comment on %s by %s, who is not in allowed_users", g.where(), termtext.OneLine(login, 60))})
			continue
		}
		if w := pin(st, "github:"+strings.ToLower(login), strconv.FormatInt(c.User.ID, 10)); w != "" {
			p.Ignored = append(p.Ignored, Ignored{Key: key, Reason: "a comment by " + termtext.OneLine(login, 60) + ": " + w})
			p.Warnings = append(p.Warnings, "github: "+termtext.OneLine(login, 60)+": "+w)
			continue
		}
		// An edit is not a new message from the comment's author: anyone with write access
		// to the repository may edit any comment, and the REST API names the author, never the
		// editor. The comment was taken as it was first pulled; an edit of it (or of one
		// written before this channel's floor) is reported and left out.
		if seenPrefix(st, "comment:"+strconv.FormatInt(c.ID, 10)+"@") || c.CreatedAt.Before(since) && c.UpdatedAt.After(c.CreatedAt) {
			p.Ignored = append(p.Ignored, Ignored{Key: key, Reason: fmt.Sprintf("an edit of a comment by %s on %s: edits are not taken as messages (the author may not be who edited it); post a new comment instead",
				termtext.OneLine(login, 60), g.where())})
			continue
		}
		subject, at := "comment on "+g.where(), c.CreatedAt
		p.Messages = append(p.Messages, Incoming{
			Key: key, From: "github:" + termtext.OneLine(login, 60), Subject: subject, Time: at,
			Body: cleanText(c.Body, MaxBody),
		})
	}
	if next == "" {
		p.Cursor.Since, p.Cursor.Next, p.Cursor.Latest = latest, "", time.Time{}
	} else {
		p.Cursor.Next, p.Cursor.Latest = next, latest
		p.Warnings = append(p.Warnings, fmt.Sprintf("github: more than %d pages of comments: the rest is read at the next poll", maxPages))
	}
	return p, nil
}

func (g *github) Push(ctx context.Context, st *State, out Outgoing, now time.Time) (string, error) {
	marker := githubMarkerOf(out.Ref)
	text := "**" + neutralizeGitHub(strings.ReplaceAll(headline(out), "*", `\*`)) + "**\n\n" +
		neutralizeGitHub(cleanText(out.Body, MaxBody))
	text = cutBytes(text, maxGitHubBody-len(marker)-2, "\n\n[cut by cryochamber: the whole text is in messages/outbox/"+out.ID+".md]")
	body, err := json.Marshal(map[string]string{"body": text + "\n\n" + marker})
	if err != nil {
		return "", err
	}
	req, err := g.request(ctx, http.MethodPost, g.api.url(g.commentsPath(), nil), body)
	if err != nil {
		return "", err
	}
	_, resp, err := g.api.do(ctx, req, now)
	if err != nil {
		return "", err
	}
	var c ghComment
	if err := decode(resp, &c, "the new comment"); err != nil {
		return "", err
	}
	return "comment:" + strconv.FormatInt(c.ID, 10), nil
}

func (g *github) Find(ctx context.Context, st *State, out Outgoing, now time.Time) (string, bool, error) {
	list, _, err := g.comments(ctx, out.Time.Add(-10*time.Minute), "", now)
	if err != nil {
		return "", false, err
	}
	marker := githubMarkerOf(out.Ref)
	for _, c := range list {
		if strings.Contains(c.Body, marker) {
			return "comment:" + strconv.FormatInt(c.ID, 10), true, nil
		}
	}
	return "", false, nil
}

// githubLimited reads GitHub's rate limit answers
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit):
// a 403 or 429 with retry-after (wait that many seconds), or with x-ratelimit-remaining 0 (wait
// until x-ratelimit-reset, in UTC epoch seconds), or a secondary limit without either (wait at
// least a minute). A 403 that is none of these is a refusal, not a limit.
func githubLimited(resp *http.Response, body []byte, now time.Time) *RateLimited {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return nil
	}
	if d, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
		return &RateLimited{Service: "GitHub", Until: now.Add(d), Why: "retry-after: " + resp.Header.Get("Retry-After")}
	}
	if resp.Header.Get("X-Ratelimit-Remaining") == "0" {
		if sec, err := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64); err == nil && sec > 0 {
			until := time.Unix(sec, 0)
			if until.After(now.Add(24 * time.Hour)) {
				until = now.Add(24 * time.Hour)
			}
			return &RateLimited{Service: "GitHub", Until: until, Why: "x-ratelimit-remaining: 0"}
		}
		return &RateLimited{Service: "GitHub", Until: now.Add(time.Minute), Why: "x-ratelimit-remaining: 0"}
	}
	if resp.StatusCode == http.StatusTooManyRequests || strings.Contains(strings.ToLower(githubErrText(body)), "rate limit") {
		return &RateLimited{Service: "GitHub", Until: now.Add(time.Minute), Why: "secondary rate limit: " + termtext.OneLine(githubErrText(body), 120)}
	}
	return nil
}

func githubErrText(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Message
}

// allowed matches a user against the configured list, ignoring case (GitHub logins and email
// addresses compare that way).
func allowed(list []string, who string) bool {
	for _, a := range list {
		if strings.EqualFold(a, who) {
			return true
		}
	}
	return false
}

// pin records the account ID behind an accepted name the first time it is seen, and refuses a
// later message whose name belongs to another account: a login that was renamed and then taken
// by someone else must not inherit the trust.
func pin(st *State, name, id string) string {
	if st.Pins == nil {
		st.Pins = map[string]string{}
	}
	if old, ok := st.Pins[name]; ok && old != id {
		return fmt.Sprintf("this name belonged to account %s when it was first accepted and now belongs to account %s: refused (if that is right, remove %q from \"pins\" in the sync state)", old, id, name)
	}
	st.Pins[name] = id
	return ""
}

// seenPrefix reports whether a remote message whose key starts with prefix was seen (an earlier
// version of an edited comment).
func seenPrefix(st *State, prefix string) bool {
	for k := range st.Seen {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}
