package channel

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/message"
)

// Defaults of Options.
const (
	// DefaultLookback is how far back a channel's first sync reads and publishes: a channel
	// added to an old chamber does not publish its whole history.
	DefaultLookback = 24 * time.Hour
	// DefaultMaxPush bounds what one sync publishes on one channel; the rest waits for the
	// next poll. An outbox flooded by a misbehaving agent cannot flood an issue at once.
	DefaultMaxPush = 20
)

// Summary is the latest finished session, published where a channel wants summaries.
type Summary struct {
	Session int
	Exit    int
	Text    string // the EXIT marker's summary (written by the agent: untrusted)
	End     time.Time
}

// Options is one sync of one chamber.
type Options struct {
	Dir      string // the chamber (absolute)
	ID       string // timer.ID(Dir)
	StateDir string // the chamber's private state directory: Env.StateDir/chambers/<ID>
	Channels []Channel
	Summary  *Summary // nil: none
	Now      func() time.Time
	Lookback time.Duration // 0: DefaultLookback
	MaxPush  int           // 0: DefaultMaxPush
	// MaxPerDay caps what one channel publishes in any 24 hours ([channels] max_per_day);
	// 0: no cap. When it bites, Result.Capped says so once a day.
	MaxPerDay int
	// Checkpoint, when set, is called at "sync-pulled" (inbox written, not recorded) and
	// "sync-pushed" (published, not recorded); the crash tests kill the process there.
	Checkpoint func(string)
}

// Result is what one sync did on one channel.
type Result struct {
	Channel  string
	Pulled   []string  // inbox messages written (not those a killed sync had written)
	Ignored  []Ignored // remote messages refused
	Pushed   []string  // items published
	Found    []string  // items a killed sync had published, found and recorded
	Warnings []string
	Waiting  time.Time // the service asked us to wait until then: nothing was asked of it
	Capped   string    // max_per_day bit in this sync, the first time in 24 hours: what to tell the operator
	Err      error     // what failed; the rest is retried at the next poll
	// Down: this poll is the DownAfter-th failed one in a row, and the operator was not told yet;
	// Back: the first poll that succeeded after they were told (down.go).
	Down, Back bool
	Failures   int // failed polls in a row, this one included
}

// Run syncs every channel of o once. The error is for what stops every channel (the state
// directory, another sync running); a channel's own failure is in its Result.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Lookback == 0 {
		o.Lookback = DefaultLookback
	}
	if o.MaxPush == 0 {
		o.MaxPush = DefaultMaxPush
	}
	if o.StateDir == "" {
		return nil, errors.New("no state directory: set HOME (or XDG_STATE_HOME)")
	}
	dir := filepath.Join(o.StateDir, SyncDir)
	if err := privateDir(o.StateDir); err != nil {
		return nil, err
	}
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	l, err := takeLock(dir)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	// The chamber is untrusted: its mailbox is only ever opened confined (no symlink followed,
	// no FIFO waited on, nothing outside the chamber).
	fs, err := confined.Open(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("open the chamber: %w", err)
	}
	defer fs.Close()
	names, err := message.Names(fs, message.OutboxDir)
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", err)
	}
	// Only what cryochamber sealed is published in its voice (message/seal.go). No key yet: it
	// has sealed nothing, and every outbox file is the agent's.
	key, err := message.LoadSealKey(filepath.Join(o.StateDir, message.SealKeyFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	s := &syncer{o: o, dir: dir, fs: fs, names: names, key: key, cache: map[string]*message.Message{}}
	var results []Result
	for _, ch := range o.Channels {
		results = append(results, s.one(ctx, ch))
	}
	return results, nil
}

type syncer struct {
	o     Options
	dir   string
	fs    *confined.Dir // the chamber
	names []string
	key   []byte                      // the chamber's seal key (nil: none yet)
	cache map[string]*message.Message // outbox messages read so far (nil: unreadable)
}

func (s *syncer) checkpoint(name string) {
	if s.o.Checkpoint != nil {
		s.o.Checkpoint(name)
	}
}

func (s *syncer) one(ctx context.Context, ch Channel) (r Result) {
	r.Channel = ch.Name()
	st, err := loadState(s.dir, ch.Name())
	if err != nil {
		r.Err = fmt.Errorf("%w (move the file aside to start this channel over: its first sync then reads and publishes the last %v again)", err, s.o.Lookback)
		return r
	}
	now := s.o.Now()
	if st == nil {
		st = newState(ch.Name(), now, s.o.Lookback)
	}
	st.LastSync = now.UTC()
	var errs []error
	defer func() {
		if len(errs) == 0 {
			st.LastOK, st.LastError = st.LastSync, ""
		} else {
			msgs := make([]string, len(errs))
			for i, e := range errs {
				msgs[i] = e.Error()
			}
			st.LastError = strings.Join(msgs, "; ")
			r.Err = errors.Join(errs...)
		}
		r.Down, r.Back = st.track(len(errs) > 0, !r.Waiting.IsZero()) // down.go
		r.Failures = st.Failures
		st.prune(now)
		if err := st.save(s.dir); err != nil {
			r.Err = errors.Join(r.Err, fmt.Errorf("record the sync: %w", err))
		}
	}()
	fail := func(what string, err error) {
		var rl *RateLimited
		if errors.As(err, &rl) {
			st.RetryAfter = rl.Until
		}
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	if now.Before(st.RetryAfter) {
		r.Waiting = st.RetryAfter
		errs = append(errs, &RateLimited{Service: ch.Name(), Until: st.RetryAfter, Why: "asked at an earlier sync"})
		return r
	}

	// A publication cut short by a killed sync: look for it before publishing anything.
	pushOK := true
	if p := st.Pending; p != nil {
		item := Outgoing{ID: p.ID, Ref: p.Ref, Time: p.At}
		remote, found, err := ch.Find(ctx, st, item, now)
		switch {
		case err != nil:
			fail("look for "+p.ID+", whose publication was cut short", err)
			pushOK = false
		case found:
			s.sent(st, p.ID, remote)
			r.Found = append(r.Found, p.ID)
			st.Pending = nil
		default:
			st.Pending = nil // not there: it is published again below
		}
	}

	if !now.Before(st.RetryAfter) {
		if err := s.pull(ctx, ch, st, now, &r); err != nil {
			fail("pull", err)
		}
	}
	if pushOK && !now.Before(st.RetryAfter) {
		if err := s.push(ctx, ch, st, now, &r); err != nil {
			fail("push", err)
		}
	}
	return r
}

func (s *syncer) sent(st *State, id, remote string) {
	if st.Sent == nil {
		st.Sent = map[string]string{}
	}
	st.Sent[id] = remote
}

// pull brings what arrived into the inbox, then records the new cursor.
func (s *syncer) pull(ctx context.Context, ch Channel, st *State, now time.Time, r *Result) error {
	p, err := ch.Pull(ctx, st, now)
	if err != nil {
		return err
	}
	if st.Seen == nil {
		st.Seen = map[string]Seen{}
	}
	for _, m := range p.Messages {
		if _, ok := st.Seen[m.Key]; ok {
			continue
		}
		at := m.Time
		if at.IsZero() {
			at = now
		}
		id := inboxID(ch.Name(), m.Key, at.UTC().Format("20060102T150405.000000000Z"))
		exists, err := s.inInbox(id)
		if err != nil {
			return err
		}
		if !exists {
			body := strings.TrimRight(m.Body, "\n") + "\n"
			if strings.TrimSpace(body) == "" {
				body = "(an empty message)\n"
			}
			msg := &message.Message{ID: id, From: m.From, Subject: m.Subject, Time: at.UTC(), Kind: message.KindMessage, Body: body}
			if _, err := message.Write(s.fs, message.InboxDir, msg); err != nil && !errors.Is(err, iofs.ErrExist) {
				return fmt.Errorf("write %s to the inbox: %w", id, err)
			}
		}
		st.Seen[m.Key] = Seen{Inbox: id, At: now.UTC()}
		if len(m.Thread) > 0 {
			if st.Threads == nil {
				st.Threads = map[string][]string{}
			}
			st.Threads[id] = m.Thread
		}
		st.Pulled++ // it entered the inbox once, now or in a sync killed before recording it
		if !exists {
			r.Pulled = append(r.Pulled, id)
		}
	}
	for _, ig := range p.Ignored {
		// Kept apart from accepted keys: a stranger reusing the identity a real message will
		// have (an email Message-ID is the sender's to choose) must not make us skip that one.
		k := "ignored:" + ig.Key
		if _, ok := st.Seen[k]; ok {
			continue
		}
		st.Seen[k] = Seen{At: now.UTC()}
		st.Ignored++
		r.Ignored = append(r.Ignored, ig)
	}
	r.Warnings = append(r.Warnings, p.Warnings...)
	s.checkpoint("sync-pulled")
	st.Cursor = p.Cursor
	return st.save(s.dir)
}

// inInbox reports whether an inbox message of that ID exists, in the inbox or (claimed by a
// session) in the archive, or in the archive's month directory (message.Rotate). The inbox is
// looked at first: a session moves messages from there to the archive and on to the month,
// never back, so a message moved between two looks is still seen.
func (s *syncer) inInbox(id string) (bool, error) {
	dirs := []string{message.InboxDir, message.ArchiveDir}
	if len(id) >= 6 {
		dirs = append(dirs, message.ArchiveDir+"/"+id[:4]+"-"+id[4:6])
	}
	for _, d := range dirs {
		_, err := message.Read(s.fs, d, id+".md")
		var perr *message.ParseError
		switch {
		case err == nil, errors.As(err, &perr):
			return true, nil
		case errors.Is(err, iofs.ErrNotExist):
		default:
			return false, fmt.Errorf("look for %s in %s: %w", id, d, err)
		}
	}
	return false, nil
}

// push publishes, oldest first, what the outbox has that this channel has not published.
func (s *syncer) push(ctx context.Context, ch Channel, st *State, now time.Time, r *Result) error {
	items := s.todo(ch, st)
	window := now.Add(-24 * time.Hour)
	st.Published = slices.DeleteFunc(st.Published, func(t time.Time) bool { return t.Before(window) })
	for i, it := range items {
		if i == s.o.MaxPush {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%d more items wait for the next poll (at most %d per sync)", len(items)-i, s.o.MaxPush))
			break
		}
		if s.capped(ch, st, len(items)-i, now, r) {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Recorded before publishing: a sync killed in between leaves this for the next one
		// to look for.
		st.Pending = &Pending{ID: it.ID, Ref: it.Ref, At: now.UTC()}
		if err := st.save(s.dir); err != nil {
			return err
		}
		remote, err := ch.Push(ctx, st, it, now)
		if err != nil {
			if isRefusal(err) {
				st.Pending = nil // the service said no: nothing was published
			}
			return fmt.Errorf("%s: %w", it.ID, err)
		}
		s.checkpoint("sync-pushed")
		s.sent(st, it.ID, remote)
		if it.Kind == message.KindSummary && it.Session > 0 {
			// A summary filed in the outbox (sealed: Vouch kept its kind) stands for its
			// session's: the one from the state is not published at a later sync either
			// (todo skips a sent item before it can see what it is).
			s.sent(st, "session-"+strconv.Itoa(it.Session), remote)
		}
		st.Pending = nil
		st.Pushed++
		if s.o.MaxPerDay > 0 {
			st.Published = append(st.Published, now.UTC())
		}
		r.Pushed = append(r.Pushed, it.ID)
		if err := st.save(s.dir); err != nil {
			return err
		}
	}
	return nil
}

// capped reports whether the channel has published max_per_day items in the last 24 hours
// (st.Published holds their times). The first time it bites in 24 hours, r.Capped says so, for
// one notice to the operator; every time, a warning.
func (s *syncer) capped(ch Channel, st *State, waiting int, now time.Time, r *Result) bool {
	if s.o.MaxPerDay <= 0 || len(st.Published) < s.o.MaxPerDay {
		return false
	}
	next := st.Published[len(st.Published)-s.o.MaxPerDay].Add(24 * time.Hour)
	msg := fmt.Sprintf("%s published %d items in the last 24 hours, its max_per_day ([channels]): %d item(s) wait in the outbox; the next goes out after %s",
		ch.Name(), len(st.Published), waiting, next.UTC().Format(time.RFC3339))
	r.Warnings = append(r.Warnings, msg)
	if st.CapNoticed.IsZero() || st.CapNoticed.Before(now.Add(-24*time.Hour)) {
		st.CapNoticed = now.UTC()
		r.Capped = msg
	}
	return true
}

// todo lists the items this channel has not published: outbox replies, notices and alerts
// named after its floor, and the latest summary, in time order.
func (s *syncer) todo(ch Channel, st *State) []Outgoing {
	floor := st.Floor.UTC().Format(namePrefixLayout)
	var items []Outgoing
	filedSummary := map[int]bool{}
	for _, name := range s.names {
		id := strings.TrimSuffix(name, ".md")
		if id < floor {
			continue
		}
		if _, done := st.Sent[id]; done {
			continue
		}
		m, ok := s.cache[name]
		if !ok {
			var err error
			m, err = message.Read(s.fs, message.OutboxDir, name)
			if err != nil {
				m = nil // unreadable (half-written by hand, or not a message): left alone
			}
			s.cache[name] = m
		}
		if m == nil {
			continue
		}
		switch m.Kind {
		case message.KindReply, message.KindNotice, message.KindAlert:
		case message.KindSummary:
			// A session's summary filed in the outbox (summaries = "outbox"): published only
			// where the channel wants summaries, and then instead of the one from the state.
			if !ch.Summaries() {
				continue
			}
			if m.SealedBy(s.key) {
				filedSummary[m.Session] = true // a forged one never hides the real one
			}
		default:
			continue
		}
		// Not filed by cryochamber (the agent, or anyone who can write in the chamber): it goes
		// out as the agent's words, never as an alert, a notice or a reply from cryochamber.
		v := *m
		message.Vouch(&v, s.key)
		items = append(items, Outgoing{ID: id, Ref: Ref(s.o.ID, id), Kind: v.Kind, From: v.From, Subject: m.Subject,
			Session: m.Session, Time: m.Time, Body: m.Body, InReplyTo: m.InReplyTo})
	}
	if sum := s.o.Summary; sum != nil && ch.Summaries() && !sum.End.Before(st.Floor) && !filedSummary[sum.Session] {
		id := "session-" + strconv.Itoa(sum.Session)
		if _, done := st.Sent[id]; !done {
			items = append(items, Outgoing{ID: id, Ref: Ref(s.o.ID, id), Kind: "summary", From: "cryochamber",
				Subject: fmt.Sprintf("Session %d ended (exit %d)", sum.Session, sum.Exit), Session: sum.Session,
				Time: sum.End, Body: sum.Text})
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].Time.Before(items[j].Time) })
	return items
}

// headline is the first line of a published item: what it is, in words.
func headline(out Outgoing) string {
	sess := ""
	if out.Session > 0 {
		sess = " (session " + strconv.Itoa(out.Session) + ")"
	}
	subj := termtext.OneLine(out.Subject, maxSubject)
	switch out.Kind {
	case message.KindReply:
		h := "Reply from " + termtext.OneLine(out.From, maxFrom) + sess
		if subj != "" {
			h += ": " + subj
		}
		return h
	case message.KindNotice:
		return "Notice" + sess + ": " + subj
	case message.KindAlert:
		return "Alert" + sess + ": " + subj
	case "summary":
		return subj
	}
	return termtext.OneLine(out.Kind, 40) + sess + ": " + subj
}
