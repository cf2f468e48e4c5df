package timer

// The systemd backend's batched D-Bus work (issue 28): the timers of one Arm are stopped
// together and started together, each group's jobs waited for at the end, and timers are read
// back with their requests sent together, so that a wake pays a few round trips to the manager
// instead of one job wait after another. What is armed and read back is the same as one timer
// at a time: the readback is still the manager's own next elapse, to the second.

import (
	"context"
	"fmt"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// transientTimer is one transient timer to (re)create: its name and its properties.
type transientTimer struct {
	name  string
	props []sd.Property
}

// pendingJob is a job the manager queued; its result arrives on ch.
type pendingJob struct {
	what, name string
	ch         chan string
}

// queueJob asks the manager for a job and returns without waiting for it to run. A unit that is
// not loaded (stop) gives no job and no error when missingOK.
func (b *systemdBackend) queueJob(ctx context.Context, what, name string, missingOK bool,
	start func(context.Context, string, string, chan<- string) (int, error)) (*pendingJob, error) {
	// Buffered: go-systemd delivers the result while holding its job lock, and we may have
	// stopped listening when ctx ended.
	ch := make(chan string, 1)
	if _, err := start(ctx, name, "replace", ch); err != nil {
		if missingOK && isNoSuchUnit(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return &pendingJob{what: what, name: name, ch: ch}, nil
}

// waitJobs waits (bounded by ctx) for every job queued; the first that did not end "done" is
// the error.
func waitJobs(ctx context.Context, jobs []*pendingJob) error {
	var first error
	for _, j := range jobs {
		if j == nil {
			continue
		}
		select {
		case res := <-j.ch:
			if res != "done" && first == nil {
				first = fmt.Errorf("%s %s: job %s (see `systemctl --user status %s`)", j.what, j.name, res, j.name)
			}
		case <-ctx.Done():
			if first == nil {
				first = fmt.Errorf("%s %s: waiting for the job: %w", j.what, j.name, ctx.Err())
			}
			return first
		}
	}
	return first
}

// afterStops, when set (tests only), is called once the stops of a group have been done and
// before its starts are sent: the moment at which that group's timers are not loaded.
var afterStops func(names []string)

// startTimers (re)creates the transient timers in two groups: the first timer alone, then the
// rest together (replaceTimers). Never all at once: a wake killed between a group's stops and
// its starts (SIGKILL, OOM, a manager that stops answering) then still leaves a timer in the
// manager, the old dead-man while the wake is replaced, the new wake while the dead-man is.
// Stopping every timer before starting any left none at all, and the plan silent until the
// manager's next start.
func (b *systemdBackend) startTimers(ctx context.Context, timers []transientTimer) error {
	if len(timers) < 2 {
		return b.replaceTimers(ctx, timers)
	}
	if err := b.replaceTimers(ctx, timers[:1]); err != nil {
		return err
	}
	return b.replaceTimers(ctx, timers[1:])
}

// replaceTimers (re)creates a group of transient timers: every one still loaded (armed, or elapsed and
// kept) is stopped, the stops sent together and waited for together (a stopped transient timer
// is unloaded at once, CollectMode=inactive-or-failed, and its name is free again), then every
// timer is created, the starts sent together and waited for together. Before, each timer was
// first offered to StartTransientUnit (refused: the name was loaded), then stopped, then
// started, each job waited for in turn. A start still refused (a timer whose last start failed
// stays loaded until its failure is reset, or a unit file of the name) takes the one-at-a-time
// path, which resets and says what is in the way.
func (b *systemdBackend) replaceTimers(ctx context.Context, timers []transientTimer) error {
	stops := make([]*pendingJob, 0, len(timers))
	for _, t := range timers {
		j, err := b.queueJob(ctx, "stop", t.name, true, b.conn.StopUnitContext)
		if err != nil {
			return err
		}
		stops = append(stops, j)
	}
	if err := waitJobs(ctx, stops); err != nil {
		return err
	}
	if afterStops != nil {
		names := make([]string, len(timers))
		for i, t := range timers {
			names[i] = t.name
		}
		afterStops(names)
	}
	starts := make([]*pendingJob, 0, len(timers))
	var refused []transientTimer
	var first error
	for _, t := range timers {
		props := t.props
		j, err := b.queueJob(ctx, "arm", t.name, false, func(ctx context.Context, name, mode string, ch chan<- string) (int, error) {
			return b.conn.StartTransientUnitContext(ctx, name, mode, props, ch)
		})
		switch {
		case err != nil && isUnitExists(err):
			refused = append(refused, t)
		case err != nil:
			first = err
		}
		starts = append(starts, j)
		if first != nil {
			break
		}
	}
	if err := waitJobs(ctx, starts); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return first
	}
	for _, t := range refused {
		if err := b.startTimer(ctx, t.name, t.props); err != nil {
			return err
		}
	}
	return nil
}

// nextOf reads timer name's next elapse: its LoadState and NextElapseUSecRealtime, the two
// requests sent together (a unit that is not loaded has no next elapse, whatever the second
// answer says).
func (b *systemdBackend) nextOf(ctx context.Context, name string) (time.Time, bool, error) {
	var (
		wg       sync.WaitGroup
		load     *sd.Property
		loadErr  error
		elapse   *sd.Property
		elapsErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		elapse, elapsErr = b.conn.GetUnitTypePropertyContext(ctx, name, "Timer", "NextElapseUSecRealtime")
	}()
	load, loadErr = b.conn.GetUnitPropertyContext(ctx, name, "LoadState")
	wg.Wait()
	if loadErr != nil {
		if isNoSuchUnit(loadErr) {
			return time.Time{}, false, nil
		}
		return time.Time{}, false, fmt.Errorf("read %s: %w", name, loadErr)
	}
	if s, _ := load.Value.Value().(string); s != "loaded" {
		return time.Time{}, false, nil
	}
	if elapsErr != nil {
		return time.Time{}, false, fmt.Errorf("read %s: %w", name, elapsErr)
	}
	return elapseTime(name, elapse)
}

// elapseTime turns NextElapseUSecRealtime into a time; none (0, infinity) is not ok.
func elapseTime(name string, p *sd.Property) (time.Time, bool, error) {
	us, ok := p.Value.Value().(uint64)
	if !ok {
		return time.Time{}, false, fmt.Errorf("read %s: NextElapseUSecRealtime is %s, not a number", name, p.Value.Signature())
	}
	if us == 0 || us == ^uint64(0) || us > uint64(1<<63-1) {
		return time.Time{}, false, nil
	}
	return time.UnixMicro(int64(us)).UTC(), true, nil
}

// nextAllParallel bounds the reads NextAll has in flight at once.
const nextAllParallel = 16

// NextAll answers as Next would for every ref: one ListUnitsByNames says which timers the
// manager has loaded (it answers for names it does not have too), then the next elapse of each
// loaded one is asked for, the requests sent together. A name the list does not answer for is
// read as Next reads it.
func (b *systemdBackend) NextAll(ctx context.Context, refs []Ref) []NextAnswer {
	out := make([]NextAnswer, len(refs))
	names := make([]string, 0, len(refs))
	idx := map[string][]int{}
	for i, r := range refs {
		if err := checkID(r.ID); err != nil {
			out[i].Err = err
			continue
		}
		n := SystemdTimerName(r.ID, r.Kind)
		if _, seen := idx[n]; !seen {
			names = append(names, n)
		}
		idx[n] = append(idx[n], i)
	}
	if len(names) == 0 {
		return out
	}
	load := map[string]string{}
	if units, err := b.conn.ListUnitsByNamesContext(ctx, names); err == nil {
		for _, u := range units {
			load[u.Name] = u.LoadState
		}
	}
	sem := make(chan struct{}, nextAllParallel)
	var wg sync.WaitGroup
	for _, n := range names {
		ls, listed := load[n]
		if listed && ls != "loaded" {
			continue // not armed: the zero answer
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(n string, listed bool) {
			defer func() { <-sem; wg.Done() }()
			var a NextAnswer
			if listed {
				p, err := b.conn.GetUnitTypePropertyContext(ctx, n, "Timer", "NextElapseUSecRealtime")
				if err != nil {
					a.Err = fmt.Errorf("read %s: %w", n, err)
				} else {
					a.At, a.OK, a.Err = elapseTime(n, p)
				}
			} else {
				a.At, a.OK, a.Err = b.nextOf(ctx, n)
			}
			for _, i := range idx[n] {
				out[i] = a
			}
		}(n, listed)
	}
	wg.Wait()
	return out
}
