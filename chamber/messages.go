package chamber

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
	"github.com/cryochamber/cryochamber/internal/termtext"
	"github.com/cryochamber/cryochamber/message"
)

// receivedFile (in the private state directory) lists the outbox messages `receive` has
// printed, one name per line.
const receivedFile = "received"

// SendOptions are the options of `cryochamber send`.
type SendOptions struct {
	Dir     string
	Text    string
	From    string
	Subject string
	Wake    bool // start the chamber's wake service now
}

// Send writes a message to the chamber's inbox. The session that claims it shows it to the
// agent and answers it. It takes no lock: publishing is a link(2) into the inbox, and a session
// that is claiming right now either sees the file or leaves it for the next session.
func Send(ctx context.Context, env *Env, opts SendOptions) error {
	if strings.TrimSpace(opts.Text) == "" {
		return usageErr(`cryochamber send "text" (or - to read the text from standard input)`, "the message is empty")
	}
	r, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true})
	var ce *Error
	started := err == nil
	if err != nil && (!errors.As(err, &ce) || ce.Kind != Usage) {
		return err
	}
	if !started {
		// Not started yet: a message for its first session, if the chamber was made by init.
		dir, aerr := AbsDir(opts.Dir)
		if aerr != nil {
			return aerr
		}
		fs, ferr := confined.Open(dir)
		if ferr != nil {
			return err
		}
		if _, lerr := fs.Lstat(inboxDir); lerr != nil {
			fs.Close()
			return err
		}
		r = &runner{env: env, dir: dir, fs: fs, out: env.Stdout}
	}
	defer r.close()
	if r.fs == nil {
		return &Error{Msg: "cannot write the message: " + r.chamberMissing(), Hint: "`cryochamber status --dir " + r.dir + "` says more"}
	}
	from := opts.From
	if from == "" {
		from = env.Getenv("USER")
	}
	if from == "" {
		from = "operator"
	}
	m := &message.Message{From: from, Subject: opts.Subject, Time: env.Now().UTC(), Kind: message.KindMessage, Body: opts.Text}
	name, err := message.Write(r.fs, inboxDir, m)
	if err != nil {
		return &Error{Kind: Usage, Msg: "cannot write the message", Err: err, Hint: "the sender and subject must be one line of text; the body at most 1 MiB"}
	}
	fmt.Fprintf(env.Stdout, "sent %s\n", name)

	if !started {
		fmt.Fprintf(env.Stdout, "the chamber has not started: the message will be read by its first session\n")
		if opts.Wake {
			return failErr("cryochamber start "+filepath.Join(r.dir, DefaultPlan), "cannot wake a chamber that has not started")
		}
		return nil
	}
	st, cfg := r.st, r.cfg
	if !st.Phase.Active() {
		fmt.Fprintf(env.Stdout, "the chamber is %s: the message will be read when it starts again\n", st.Phase)
		if opts.Wake {
			return failErr("cryochamber start "+filepath.Join(r.dir, r.planName()), "cannot wake a chamber that is %s", st.Phase)
		}
		return nil
	}
	if !opts.Wake {
		switch {
		case r.nudge(ctx):
			fmt.Fprintf(env.Stdout, "the chamber watches its inbox: a session starts within seconds\n")
		case st.Wake != nil:
			fmt.Fprintf(env.Stdout, "it will be read at the next wake, %s; --wake to wake it now\n", When(*st.Wake, cfg.Location, env.Now()))
		}
		return nil
	}
	// The request survives a wake that is already running: that wake looks for it last.
	if err := r.requestWake(ctx); err != nil {
		if e, ok := errorsAs[*Error](err); ok {
			e.Msg = "message saved, but " + e.Msg
		}
		return err
	}
	fmt.Fprintf(env.Stdout, "woke the chamber: a session starts now\n")
	return nil
}

// nudge starts the wake service of an active chamber that watches its inbox, after a message
// was written into the inbox, and reports whether the chamber watches. systemd drops the
// watcher's PathChanged= event when it comes while the user manager reloads (start, reload and
// other programs of the user still reload it), so whoever writes a message starts the service
// as well: both starts merge into one run. One try, bounded: a failure leaves the watcher to do
// it, and a bus that does not answer must not hold up a message that is already delivered.
func (r *runner) nudge(ctx context.Context) bool {
	if !r.st.Phase.Active() || !*r.cfg.WatchInbox || !r.st.Timers.Watch {
		return false
	}
	kctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	if be, err := r.backend(kctx); err == nil {
		_ = be.RunNow(kctx, r.id)
	}
	return true
}

// Nudge is what send does after writing a message, for a command that wrote into the inbox of
// the chamber in dir without opening it (sync): it starts the wake service if the chamber
// watches its inbox, and reports whether it does.
func Nudge(ctx context.Context, env *Env, dir string) (bool, error) {
	r, _, err := open(ctx, env, dir, openOptions{unlocked: true})
	if err != nil {
		return false, err
	}
	defer r.close()
	return r.nudge(ctx), nil
}

// ReceiveOptions are the options of `cryochamber receive`.
type ReceiveOptions struct {
	Dir  string
	All  bool // also what was printed before
	JSON bool
}

// ReceivedMessage is one outbox message as `receive --json` prints it.
type ReceivedMessage struct {
	Box       string    `json:"box,omitempty"` // Conversation: inbox, archive or outbox
	ID        string    `json:"id"`
	From      string    `json:"from"`
	Subject   string    `json:"subject,omitempty"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	Session   int       `json:"session,omitempty"`
	InReplyTo []string  `json:"in_reply_to,omitempty"`
	Delivery  string    `json:"delivery,omitempty"`
	Body      string    `json:"body"`
}

// Receive prints the outbox messages not printed before, and marks them read. Every piece of
// text goes through the terminal sanitizer: the agent wrote most of it.
func Receive(ctx context.Context, env *Env, opts ReceiveOptions) error {
	r, _, err := open(ctx, env, opts.Dir, openOptions{unlocked: true})
	if err != nil {
		return err
	}
	defer r.close()
	if r.fs == nil {
		return &Error{Msg: r.chamberMissing()}
	}
	names, err := message.Names(r.fs, outboxDir)
	if err != nil {
		return &Error{Err: err}
	}
	type item struct{ dir, name string }
	var items []item
	if opts.All {
		// With --all, the months the outbox was rotated into first (oldest first), then the
		// live outbox.
		months, err := message.Months(r.fs, outboxDir)
		if err != nil {
			return &Error{Err: err}
		}
		for _, mo := range months {
			sub := outboxDir + "/" + mo
			old, err := message.Names(r.fs, sub)
			if err != nil {
				env.warnf("skipping %s: %v", sub, err)
				continue
			}
			for _, n := range old {
				items = append(items, item{sub, n})
			}
		}
	}
	for _, n := range names {
		items = append(items, item{outboxDir, n})
	}
	readPath := r.store.path(receivedFile)
	read := loadReceived(readPath)
	key := r.sealKey()
	var list []ReceivedMessage
	var printed []string
	for _, it := range items {
		name := it.name
		if read[name] && !opts.All {
			continue
		}
		m, err := message.Read(r.fs, it.dir, name)
		if err != nil {
			env.warnf("skipping %s: %v", name, err)
			continue
		}
		message.Vouch(m, key) // an alert the agent wrote is shown as the agent's words
		list = append(list, ReceivedMessage{ID: m.ID, From: m.From, Subject: m.Subject, Time: m.Time, Kind: m.Kind, Session: m.Session, InReplyTo: nonNil(m.InReplyTo), Delivery: m.Delivery, Body: m.Body})
		printed = append(printed, name)
	}
	if opts.JSON {
		if list == nil {
			list = []ReceivedMessage{}
		}
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			return err
		}
	} else {
		if len(list) == 0 {
			fmt.Fprintln(env.Stdout, "no new messages")
		}
		for _, m := range list {
			writeMessage(env.Stdout, m)
		}
	}
	if len(printed) == 0 {
		return nil
	}
	// Remember what was printed; forget names that left the outbox so the file stays small.
	inOutbox := map[string]bool{}
	for _, n := range names {
		inOutbox[n] = true
	}
	for _, n := range printed {
		read[n] = true
	}
	var keep []string
	for n := range read {
		if inOutbox[n] {
			keep = append(keep, n)
		}
	}
	sort.Strings(keep)
	if err := r.store.write(receivedFile, []byte(strings.Join(keep, "\n")+"\n"), nil); err != nil {
		return &Error{Msg: "printed, but could not mark the messages read", Err: err}
	}
	return nil
}

func loadReceived(path string) map[string]bool {
	read := map[string]bool{}
	f, err := os.Open(path)
	if err != nil {
		return read
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
	for sc.Scan() {
		if n := strings.TrimSpace(sc.Text()); n != "" {
			read[n] = true
		}
	}
	return read
}

func writeMessage(w io.Writer, m ReceivedMessage) {
	head := fmt.Sprintf("== %s  %s from %s", m.Time.Format(time.RFC3339), m.Kind, termtext.Line(m.From))
	if m.Session > 0 {
		head += fmt.Sprintf(" (session %d)", m.Session)
	}
	fmt.Fprintln(w, head)
	if m.Subject != "" {
		fmt.Fprintf(w, "subject: %s\n", termtext.Line(m.Subject))
	}
	if m.Delivery != "" {
		fmt.Fprintf(w, "delivery: %s\n", termtext.Line(m.Delivery))
	}
	fmt.Fprintln(w)
	body := termtext.Text(m.Body)
	fmt.Fprint(w, body)
	if !strings.HasSuffix(body, "\n") {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// ReadText reads a message body from r (for `send -`), bounded by the message size limit.
func ReadText(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, message.MaxSize+1))
	if err != nil {
		return "", err
	}
	if len(data) > message.MaxSize {
		return "", errors.New("the message is longer than 1 MiB")
	}
	return string(data), nil
}
