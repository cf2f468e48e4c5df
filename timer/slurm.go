package timer

// This file holds the Slurm backend: every timer of a chamber is a batch job that Slurm holds
// until its begin time (`sbatch --begin`), on whichever node of the cluster it picks. Slurm
// keeps pending jobs in its StateSaveLocation, so a job outlives a restart of the controller,
// and `--dependency=singleton` runs at most one job of a name at a time. Nothing of ours runs
// between sessions, as with systemd and launchd.
//
// Each timer is a small job script in the backend's private directory (Options.JobDir), which
// sbatch copies at submission: the script execs the cryochamber binary by absolute path. Every
// word it holds is single-quoted (shellQuote), and the #SBATCH lines carry only words checked
// against a narrow alphabet (checkSbatchArg): nothing of the chamber reaches a shell unquoted.
// The commands run with the environment given in Options (SLURM_CONF among it, so a test runs
// a private cluster), never this process's.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/internal/envvars"
	"github.com/cryochamber/cryochamber/internal/program"
)

// SlurmOptions configure the Slurm backend.
type SlurmOptions struct {
	// JobDir is the private directory (0700) of the job scripts: JobDir/<ID>/<kind>.sh. On a
	// cluster it must be on the filesystem every node shares, as the chamber is.
	JobDir string
	// Environ is the environment of the Slurm commands (sbatch, squeue, scancel, scontrol):
	// PATH finds them, SLURM_CONF names the cluster. TZ is set to UTC for them.
	Environ []string
	// User is whose jobs squeue lists (the current user).
	User string
}

// slurmProgs are the client commands the backend runs, found on Environ's PATH.
var slurmProgs = []string{"sbatch", "squeue", "scancel", "scontrol"}

type slurmBackend struct {
	o    SlurmOptions
	prog map[string]string // name → absolute path
}

// NewSlurm finds the Slurm client commands. It does not reach the controller (Preflight does).
func NewSlurm(ctx context.Context, o SlurmOptions) (Backend, error) {
	if o.JobDir == "" || !filepath.IsAbs(o.JobDir) {
		return nil, fmt.Errorf("%w: the slurm backend needs the private state directory (is HOME set?)", ErrUnavailable)
	}
	b := &slurmBackend{o: o, prog: map[string]string{}}
	path, _ := lookupEnviron(o.Environ, "PATH")
	for _, name := range slurmProgs {
		p, err := program.Look(name, "/", path)
		if err != nil {
			return nil, &HintError{Err: fmt.Errorf("%w: %v", ErrUnavailable, err), Hint: "install the Slurm client commands (Debian: apt-get install slurm-client) or put them on PATH"}
		}
		b.prog[name] = p
	}
	return b, nil
}

func (b *slurmBackend) Name() string { return "slurm" }
func (b *slurmBackend) Close() error { return nil }

// SlurmJobName is the name of the job of kind k of chamber id: `<ID>-wake`, `<ID>-fallback`,
// `<ID>-alert`, `<ID>-sync`. IDs start with Prefix, so every name starts with "cryo-".
func SlurmJobName(id string, k Kind) string { return id + "-" + string(k) }

func (b *slurmBackend) chamberDir(id string) string { return filepath.Join(b.o.JobDir, id) }
func (b *slurmBackend) script(id string, k Kind) string {
	return filepath.Join(b.chamberDir(id), string(k)+".sh")
}

// run runs one Slurm command and returns its standard output. A failure says what the command
// printed on stderr; one that could not reach the controller wraps ErrUnavailable.
func (b *slurmBackend) run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.prog[name], args...)
	cmd.Env = append(append([]string(nil), b.o.Environ...), "TZ=UTC")
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" { // scontrol ping says it on stdout: "Slurmctld(primary) at host is DOWN"
			msg, _, _ = strings.Cut(strings.TrimSpace(out.String()), "\n")
		}
		if len(msg) > 400 {
			msg = msg[:400] + "..."
		}
		if msg == "" || ctx.Err() != nil {
			msg = strings.TrimSpace(msg + " (" + err.Error() + ")")
		}
		err = fmt.Errorf("%s: %s", name, msg)
		if ctx.Err() != nil || strings.Contains(msg, "Unable to contact slurm controller") || strings.Contains(msg, "Connection refused") || strings.Contains(msg, "Socket timed out") || strings.Contains(msg, " is DOWN") {
			return nil, unreachable(err)
		}
		return nil, err
	}
	return out.Bytes(), nil
}

// unreachable marks err as the controller not answering.
func unreachable(err error) error {
	return &HintError{Err: fmt.Errorf("%w: %v", ErrUnavailable, err), Hint: "check that slurmctld runs (`scontrol ping`) and that SLURM_CONF names this cluster; see docs/CLUSTER.md"}
}

// Preflight asks the controller whether it answers before session 1 runs.
func (b *slurmBackend) Preflight(ctx context.Context) error {
	_, err := b.run(ctx, "/", "scontrol", "ping")
	return err
}

// Advice: what a site must leave in place for the jobs to run.
func (b *slurmBackend) Advice() []string {
	return []string{"the chamber, the private state and the binary must stay at the same paths on every node (a shared filesystem); see docs/CLUSTER.md"}
}

// Arm writes each job's script and submits it with its begin time; only then does it cancel
// the pending jobs of the same name that were there before, so a failed submission leaves the
// old timer armed. The new job's singleton dependency waits for the cancelled ones to go.
func (b *slurmBackend) Arm(ctx context.Context, c Chamber, jobs ...Job) error {
	if err := checkID(c.ID); err != nil {
		return err
	}
	for _, j := range jobs {
		if err := checkKind(j.Kind); err != nil {
			return err
		}
		if j.At.IsZero() {
			return fmt.Errorf("%s job: no time given", j.Kind)
		}
	}
	queued, err := b.Jobs(ctx, c.ID) // one squeue for every kind
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := b.writeScript(c, j.Kind, j.Argv, 0); err != nil {
			return err
		}
		if _, err := b.submit(ctx, c.ID, j.Kind, j.At); err != nil {
			return err
		}
		var old []SlurmJob
		for _, q := range queued {
			if q.Name == SlurmJobName(c.ID, j.Kind) {
				old = append(old, q)
			}
		}
		if err := b.cancel(ctx, pendingIDs(old)...); err != nil {
			return err
		}
	}
	return nil
}

// submit queues the job script of kind k to begin at at and returns the job's id.
func (b *slurmBackend) submit(ctx context.Context, id string, k Kind, at time.Time) (int64, error) {
	begin := "now"
	if !at.IsZero() {
		begin = at.UTC().Format("2006-01-02T15:04:05")
	}
	dir, err := os.ReadFile(filepath.Join(b.chamberDir(id), "dir"))
	if err != nil {
		return 0, fmt.Errorf("the %s job of %s has no script: %w", k, id, err)
	}
	// The comment keeps the begin time where squeue shows it even while the singleton
	// dependency hides the eligible time (a job submitted from a running job of its name).
	args := []string{"--parsable", "--begin=" + begin}
	if !at.IsZero() {
		args = append(args, "--comment=cryochamber begin="+strconv.FormatInt(at.Unix(), 10))
	}
	out, err := b.run(ctx, string(dir), "sbatch", append(args, b.script(id, k))...)
	if err != nil {
		return 0, fmt.Errorf("submit the %s job: %w", k, err)
	}
	s, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("submit the %s job: sbatch printed %q, not a job id", k, out)
	}
	return n, nil
}

// writeScript writes the job script of kind k: #SBATCH lines, the environment, and the exec of
// argv. every > 0 (the sync job) makes the script first submit itself again to begin every
// later: a chain of one-shot jobs, since a batch job has no period.
func (b *slurmBackend) writeScript(c Chamber, k Kind, argv []string, every time.Duration) error {
	data, err := SlurmScript(c, k, argv, every, b.prog["sbatch"], b.script(c.ID, k), b.o.Environ)
	if err != nil {
		return err
	}
	d := b.chamberDir(c.ID)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", d, err)
	}
	if err := atomicfile.Write(filepath.Join(d, "dir"), []byte(c.Dir), 0o600); err != nil {
		return err
	}
	return atomicfile.Write(b.script(c.ID, k), data, 0o700)
}

// forbiddenSbatch are the options cryochamber sets itself: extra_args may not change them.
var forbiddenSbatch = []string{"--begin", "-b", "--job-name", "-J", "--dependency", "-d", "--wrap", "--export", "--output", "-o", "--error", "-e", "--array", "-a", "--chdir", "-D", "--comment", "--parsable"}

// CheckSbatchArg refuses an sbatch option of cryo.toml's [slurm] that could not be written on
// an #SBATCH line as one word, or that would change what cryochamber sets itself: an option
// ("--qos=low", "--time=4:00:00") of letters, digits and `-_=:,./+@%`.
func CheckSbatchArg(arg string) error {
	if !strings.HasPrefix(arg, "-") || len(arg) < 2 || len(arg) > 256 {
		return fmt.Errorf("%q is not an sbatch option (one word starting with '-')", arg)
	}
	for _, r := range arg {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=:,./+@%", r)) {
			return fmt.Errorf("sbatch option %q contains %q: only letters, digits and -_=:,./+@%% are allowed", arg, r)
		}
	}
	name, _, _ := strings.Cut(arg, "=")
	for _, f := range forbiddenSbatch {
		// sbatch reads options with getopt_long, which takes any unambiguous abbreviation of a
		// long option ("--wra=id"), and a short option glued to its value ("-Jname").
		long := strings.HasPrefix(name, "--") && len(f) > 2 && len(name) > 2 && strings.HasPrefix(f, name)
		if name == f || long || len(f) == 2 && strings.HasPrefix(name, f) && !strings.HasPrefix(name, "--") {
			return fmt.Errorf("sbatch option %q: cryochamber sets %s itself", arg, f)
		}
	}
	return nil
}

// SlurmScript builds the job script of kind k of chamber c. It is a plain function so that
// tests check it without a cluster. c.Cluster are the chamber's own #SBATCH options.
func SlurmScript(c Chamber, k Kind, argv []string, every time.Duration, sbatch, self string, environ []string) ([]byte, error) {
	if err := checkID(c.ID); err != nil {
		return nil, err
	}
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return nil, fmt.Errorf("%s job: the program must be an absolute path, not %q", k, argv)
	}
	if !filepath.IsAbs(c.Dir) {
		return nil, fmt.Errorf("%s job: the chamber directory must be an absolute path, not %q", k, c.Dir)
	}
	for _, w := range append(append([]string{c.Dir, c.Stdout, c.Stderr, self, sbatch}, argv...), c.Env...) {
		if strings.ContainsRune(w, 0) {
			return nil, fmt.Errorf("%s job: %q contains a NUL byte", k, w)
		}
	}
	var s strings.Builder
	s.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&s, "# The %s job of cryochamber chamber %s, written at every arming (do not edit).\n", k, c.ID)
	fmt.Fprintf(&s, "#SBATCH --job-name=%s\n", SlurmJobName(c.ID, k))
	s.WriteString("#SBATCH --dependency=singleton\n")
	// The job gets the login environment of the user on the node, not the submitter's shell
	// (which may hold secrets); what it needs is exported below.
	s.WriteString("#SBATCH --export=NONE\n#SBATCH --output=/dev/null\n#SBATCH --error=/dev/null\n")
	for _, a := range c.Cluster {
		if err := CheckSbatchArg(a); err != nil {
			return nil, err
		}
		fmt.Fprintf(&s, "#SBATCH %s\n", a)
	}
	env := append([]string(nil), c.Env...)
	if v, ok := lookupEnviron(environ, "SLURM_CONF"); ok && v != "" {
		env = append(env, "SLURM_CONF="+v)
	}
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || checkEnvName(name) != nil {
			return nil, fmt.Errorf("%s job: bad environment entry %q", k, kv)
		}
		fmt.Fprintf(&s, "%s=%s; export %s\n", name, shellQuote(val), name)
	}
	if every > 0 {
		secs, err := intervalSeconds(every)
		if err != nil {
			return nil, err
		}
		// The next poll is queued before this one runs: a sync that hangs or fails does not
		// end the chain. When the script is removed (DisarmPoll), the chain ends here.
		fmt.Fprintf(&s, "%s --quiet --begin=now+%d %s >/dev/null 2>&1 || echo 'cryochamber: could not queue the next sync job' >&2\n", shellQuote(sbatch), secs, shellQuote(self))
	}
	s.WriteString("exec")
	for _, a := range argv {
		s.WriteString(" " + shellQuote(a))
	}
	if c.Stdout != "" {
		s.WriteString(" >>" + shellQuote(c.Stdout))
	}
	if c.Stderr != "" {
		s.WriteString(" 2>>" + shellQuote(c.Stderr))
	}
	s.WriteString("\n")
	return []byte(s.String()), nil
}

// shellQuote makes s one word for sh: single quotes, in which nothing is special, and each
// single quote of s closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// lookupEnviron finds name in environ; the last entry wins (envvars: the one lookup).
var lookupEnviron = envvars.Lookup

// SlurmJob is one job of a chamber as squeue shows it: what `status --json` lists.
type SlurmJob struct {
	ID    int64      `json:"id"`
	Name  string     `json:"name"`
	Begin *time.Time `json:"begin"` // when Slurm starts it (nil: after the running job of its name)
	State string     `json:"state"` // PENDING, RUNNING, ...
	Dir   string     `json:"-"`
	begin time.Time  // the begin time in the job's comment
	// late: the begin time had passed when the job was submitted (Slurm then counts from the
	// submission, and the job starts as soon as it can).
	late bool
}

// squeueJob is the part of one job of `squeue --json` (Slurm 22.05 and later) we read.
type squeueJob struct {
	JobID    int64  `json:"job_id"`
	Name     string `json:"name"`
	State    string `json:"job_state"`
	Eligible int64  `json:"eligible_time"`
	Comment  string `json:"comment"`
	Cwd      string `json:"current_working_directory"`
	User     string `json:"user_name"`
	Submit   int64  `json:"submit_time"`
}

// squeue lists the user's jobs named names (none: all of cryochamber's, named with Prefix).
func (b *slurmBackend) squeue(ctx context.Context, names ...string) ([]SlurmJob, error) {
	args := []string{"--json"}
	if b.o.User != "" {
		args = append(args, "--user="+b.o.User)
	}
	// Slurm 22.05's squeue ignores its filters under --json: the names are matched below.
	out, err := b.run(ctx, "/", "squeue", args...)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Jobs   []squeueJob `json:"jobs"`
		Errors []struct {
			Description string `json:"description"`
			Error       string `json:"error"`
			Source      string `json:"source"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	// With the controller down, squeue --json exits 0 with no jobs and an error: that is no
	// answer at all, never "no timer".
	if len(resp.Errors) > 0 {
		e := resp.Errors[0]
		return nil, unreachable(fmt.Errorf("squeue --json: %s: %s (%s)", e.Source, e.Description, e.Error))
	}
	var jobs []SlurmJob
	for _, j := range resp.Jobs {
		if !strings.HasPrefix(j.Name, Prefix) || len(names) > 0 && !slices.Contains(names, j.Name) || b.o.User != "" && j.User != "" && j.User != b.o.User {
			continue
		}
		switch j.State {
		case "PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING":
		default:
			continue // finished jobs linger in squeue for a few minutes
		}
		sj := SlurmJob{ID: j.JobID, Name: j.Name, State: j.State, Dir: j.Cwd}
		if j.Eligible > 0 {
			t := time.Unix(j.Eligible, 0).UTC()
			sj.Begin = &t
		}
		if _, v, ok := strings.Cut(j.Comment, "cryochamber begin="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				sj.begin = time.Unix(n, 0).UTC()
				sj.late = j.Submit > 0 && n <= j.Submit
			}
		}
		jobs = append(jobs, sj)
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
	return jobs, nil
}

// queued lists the jobs of one kind of a chamber.
func (b *slurmBackend) queued(ctx context.Context, id string, k Kind) ([]SlurmJob, error) {
	return b.squeue(ctx, SlurmJobName(id, k))
}

func pendingIDs(jobs []SlurmJob) []int64 {
	var ids []int64
	for _, j := range jobs {
		if j.State == "PENDING" {
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// cancel cancels the pending jobs by id; a job that ended meanwhile is not an error. Only
// pending ones: a job listed as pending may have started since, and a running session (or
// dead-man check) must not be killed by a re-arming.
func (b *slurmBackend) cancel(ctx context.Context, ids ...int64) error {
	return b.scancel(ctx, []string{"--state=PENDING"}, ids)
}

// scancel cancels the jobs by id, with filters.
func (b *slurmBackend) scancel(ctx context.Context, filters []string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := append([]string{"--quiet"}, filters...)
	for _, id := range ids {
		args = append(args, strconv.FormatInt(id, 10))
	}
	_, err := b.run(ctx, "/", "scancel", args...)
	return err
}

// Jobs lists every queued or running job of chamber id, for `status`.
func (b *slurmBackend) Jobs(ctx context.Context, id string) ([]SlurmJob, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	var names []string
	for _, k := range append(append([]Kind(nil), Kinds...), SyncJob) {
		names = append(names, SlurmJobName(id, k))
	}
	return b.squeue(ctx, names...)
}

// Read reads the pending job of kind k back: "slurm holds job 12 → next ...". The instant is
// the job's eligible time, which Slurm computed from --begin; while a running job of the same
// name holds the singleton dependency and the begin time has passed, Slurm shows none, and the
// begin time in the job's comment stands in.
func (b *slurmBackend) Read(ctx context.Context, id string, k Kind) (Reading, bool, error) {
	if err := checkID(id); err != nil {
		return Reading{}, false, err
	}
	jobs, err := b.queued(ctx, id, k)
	if err != nil {
		return Reading{}, false, err
	}
	var last *SlurmJob
	for i := range jobs {
		if jobs[i].State == "PENDING" {
			last = &jobs[i]
		}
	}
	if last == nil {
		return Reading{Backend: b.Name()}, false, nil
	}
	r := Reading{Backend: b.Name(), Precision: time.Second, Loc: time.UTC, Held: fmt.Sprintf("job %d", last.ID)}
	switch {
	case last.late:
		r.Next = last.begin
		r.Held += " (due when submitted: as soon as it can)"
	case last.Begin != nil:
		r.Next = *last.Begin
	case !last.begin.IsZero():
		r.Next = last.begin
		r.Held += " (after the running job of its name)"
	}
	return r, true, nil
}

func (b *slurmBackend) Next(ctx context.Context, id string, k Kind) (time.Time, bool, error) {
	r, ok, err := b.Read(ctx, id, k)
	if err != nil || !ok || r.Next.IsZero() {
		return time.Time{}, false, err
	}
	return r.Next, true, nil
}

// Disarm cancels the pending jobs of kind k. A running one is a session (or a dead-man check)
// under way, which must finish: the session itself is what disarms.
func (b *slurmBackend) Disarm(ctx context.Context, id string, k Kind) error {
	if err := checkID(id); err != nil {
		return err
	}
	jobs, err := b.queued(ctx, id, k)
	if err != nil {
		return err
	}
	return b.cancel(ctx, pendingIDs(jobs)...)
}

// Watch records that the chamber wants its inbox watched. Slurm has no path watcher: the
// commands that write into the inbox (send, sync) start the wake through RunNow.
func (b *slurmBackend) Watch(ctx context.Context, c Chamber, dir string, wakeArgv []string) error {
	if err := checkID(c.ID); err != nil {
		return err
	}
	if _, err := os.Stat(b.script(c.ID, Wake)); err != nil {
		if err := b.writeScript(c, Wake, wakeArgv, 0); err != nil {
			return err
		}
	}
	return atomicfile.Write(filepath.Join(b.chamberDir(c.ID), "watch"), []byte(dir+"\n"), 0o600)
}

func (b *slurmBackend) Unwatch(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(b.chamberDir(id), "watch")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// RunNow makes the wake start at once: the pending wake job, if there is one, begins now (a
// session that runs keeps it waiting on its singleton dependency: the starts merge, as a
// systemd service started twice runs once); otherwise a new wake job is submitted to begin
// now. A wake that then finds nothing due re-arms its timer from the state.
func (b *slurmBackend) RunNow(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	jobs, err := b.queued(ctx, id, Wake)
	if err != nil {
		return err
	}
	if p := pendingIDs(jobs); len(p) > 0 {
		_, err := b.run(ctx, "/", "scontrol", "update", "JobId="+strconv.FormatInt(p[len(p)-1], 10), "StartTime=now")
		return err
	}
	_, err = b.submit(ctx, id, Wake, time.Time{})
	return err
}

// Installed lists the chambers that have jobs queued or a watch recorded.
func (b *slurmBackend) Installed(ctx context.Context) ([]Installed, error) {
	jobs, err := b.squeue(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Installed{}
	var ids []string
	get := func(id string) *Installed {
		if in, ok := byID[id]; ok {
			return in
		}
		byID[id] = &Installed{ID: id}
		ids = append(ids, id)
		return byID[id]
	}
	for _, j := range jobs {
		for _, k := range append(append([]Kind(nil), Kinds...), SyncJob) {
			id, ok := strings.CutSuffix(j.Name, "-"+string(k))
			if !ok || checkID(id) != nil {
				continue
			}
			in := get(id)
			if in.Dir == "" {
				in.Dir = j.Dir
			}
			if k != SyncJob && !containsKind(in.Kinds, k) {
				in.Kinds = append(in.Kinds, k)
			}
			break
		}
	}
	ents, _ := os.ReadDir(b.o.JobDir)
	for _, e := range ents {
		if checkID(e.Name()) != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(b.chamberDir(e.Name()), "watch")); err != nil {
			continue
		}
		in := get(e.Name())
		in.Watch = true
		if dir, err := os.ReadFile(filepath.Join(b.chamberDir(e.Name()), "dir")); err == nil && in.Dir == "" {
			in.Dir = string(dir)
		}
	}
	out := make([]Installed, 0, len(ids))
	for _, id := range ids {
		out = append(out, *byID[id])
	}
	return out, nil
}

func (b *slurmBackend) Warnings(ctx context.Context) []string { return nil }

// ArmPoll writes the sync job's script, which queues its next run before each run, and
// submits its first run; the chain that was there before is cancelled.
func (b *slurmBackend) ArmPoll(ctx context.Context, c Chamber, every time.Duration, argv []string) error {
	if err := checkID(c.ID); err != nil {
		return err
	}
	if err := b.writeScript(c, SyncJob, argv, every); err != nil {
		return err
	}
	old, err := b.queued(ctx, c.ID, SyncJob)
	if err != nil {
		return err
	}
	if _, err := b.submit(ctx, c.ID, SyncJob, time.Time{}); err != nil {
		return err
	}
	return b.cancel(ctx, pendingIDs(old)...)
}

// DisarmPoll removes the sync script first, so that a running sync cannot queue its next run,
// then cancels the chain's jobs.
func (b *slurmBackend) DisarmPoll(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := os.Remove(b.script(id, SyncJob)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	jobs, err := b.queued(ctx, id, SyncJob)
	if err != nil {
		return err
	}
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return b.scancel(ctx, nil, ids) // a sync under way too: it loses nothing (timer/sync.go)
}

func (b *slurmBackend) PollArmed(ctx context.Context, id string) (bool, error) {
	if err := checkID(id); err != nil {
		return false, err
	}
	if _, err := os.Stat(b.script(id, SyncJob)); err != nil {
		return false, nil
	}
	jobs, err := b.queued(ctx, id, SyncJob)
	return len(jobs) > 0, err
}
