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

	"github.com/cryochamber/cryochamber/message"
)

// receivedFile lists the outbox messages `receive` has printed (one name per line).
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
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	if !IsChamber(dir) {
		if _, err := os.Stat(filepath.Join(dir, inboxDir)); err != nil {
			return notChamber(dir)
		}
	}
	if strings.TrimSpace(opts.Text) == "" {
		return usageErr(`cryochamber send "text" (or - to read the text from standard input)`, "the message is empty")
	}
	from := opts.From
	if from == "" {
		from = env.Getenv("USER")
	}
	if from == "" {
		from = "operator"
	}
	m := &message.Message{From: from, Subject: opts.Subject, Time: env.Now().UTC(), Kind: message.KindMessage, Body: opts.Text}
	path, err := message.Write(filepath.Join(dir, inboxDir), m)
	if err != nil {
		return &Error{Status: 2, Msg: "cannot write the message", Err: err, Hint: "the sender and subject must be one line of text; the body at most 1 MiB"}
	}
	fmt.Fprintf(env.Stdout, "sent %s\n", filepath.Base(path))

	if !IsChamber(dir) {
		fmt.Fprintf(env.Stdout, "the chamber has not started: the message will be read by its first session\n")
		if opts.Wake {
			return failErr("cryochamber start "+filepath.Join(dir, DefaultPlan), "cannot wake a chamber that has not started")
		}
		return nil
	}
	cfg, st, err := loadForCommand(dir, env)
	if err != nil {
		return err
	}
	if !st.Phase.Active() {
		fmt.Fprintf(env.Stdout, "the chamber is %s: the message will be read when it starts again\n", st.Phase)
		if opts.Wake {
			return failErr("cryochamber start "+filepath.Join(dir, st.Plan), "cannot wake a chamber that is %s", st.Phase)
		}
		return nil
	}
	if !opts.Wake {
		switch {
		case *cfg.WatchInbox && st.Timers.Watch:
			fmt.Fprintf(env.Stdout, "the chamber watches its inbox: a session starts within seconds\n")
		case st.Wake != nil:
			fmt.Fprintf(env.Stdout, "it will be read at the next wake, %s (%s); --wake to wake it now\n", st.Wake.In(cfg.Location).Format(time.RFC3339), Relative(*st.Wake, env.Now()))
		}
		return nil
	}
	// The request survives a wake that is already running: the next one sees it.
	if err := writePrivate(filepath.Join(dir, PrivateDir, WakeRequest), []byte(env.Now().UTC().Format(time.RFC3339)+"\n")); err != nil {
		return &Error{Status: 1, Err: err}
	}
	name := cfg.Backend
	if name == "" {
		name = st.Backend
	}
	be, err := env.OpenBackend(ctx, name)
	if err != nil {
		return &Error{Status: 1, Msg: "message saved, but the chamber cannot be woken", Err: err, Hint: backendHint(name)}
	}
	defer be.Close()
	if err := be.RunNow(ctx, st.ID); err != nil {
		return &Error{Status: 1, Msg: "message saved, but the chamber cannot be woken", Err: err, Hint: "it will be read at the next wake; `cryochamber status` shows when"}
	}
	fmt.Fprintf(env.Stdout, "woke the chamber: a session starts now\n")
	return nil
}

// ReceiveOptions are the options of `cryochamber receive`.
type ReceiveOptions struct {
	Dir  string
	All  bool // also what was printed before
	JSON bool
}

// ReceivedMessage is one outbox message as `receive --json` prints it.
type ReceivedMessage struct {
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

// Receive prints the outbox messages not printed before, and marks them read.
func Receive(env *Env, opts ReceiveOptions) error {
	dir, err := AbsDir(opts.Dir)
	if err != nil {
		return err
	}
	out := filepath.Join(dir, outboxDir)
	if _, err := os.Stat(out); err != nil {
		return notChamber(dir)
	}
	names, err := message.Names(out)
	if err != nil {
		return &Error{Status: 1, Err: err}
	}
	readPath := filepath.Join(dir, PrivateDir, receivedFile)
	read := loadReceived(readPath)
	var list []ReceivedMessage
	var printed []string
	for _, name := range names {
		if read[name] && !opts.All {
			continue
		}
		m, err := message.Read(out, name)
		if err != nil {
			fmt.Fprintf(env.Stderr, "cryochamber: skipping %s: %v\n", name, err)
			continue
		}
		list = append(list, ReceivedMessage{ID: m.ID, From: m.From, Subject: m.Subject, Time: m.Time, Kind: m.Kind, Session: m.Session, InReplyTo: m.InReplyTo, Delivery: m.Delivery, Body: m.Body})
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
	if err := ensurePrivateDir(dir); err != nil {
		return &Error{Status: 1, Err: err}
	}
	if err := writePrivate(readPath, []byte(strings.Join(keep, "\n")+"\n")); err != nil {
		return &Error{Status: 1, Msg: "printed, but could not mark the messages read", Err: err}
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
	head := fmt.Sprintf("== %s  %s from %s", m.Time.Format(time.RFC3339), m.Kind, m.From)
	if m.Session > 0 {
		head += fmt.Sprintf(" (session %d)", m.Session)
	}
	fmt.Fprintln(w, head)
	if m.Subject != "" {
		fmt.Fprintf(w, "subject: %s\n", m.Subject)
	}
	if m.Delivery != "" {
		fmt.Fprintf(w, "delivery: %s\n", m.Delivery)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, m.Body)
	if !strings.HasSuffix(m.Body, "\n") {
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
