package chamber

import (
	"context"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// prefetched is a backend whose Next answers for some timers were read together
// (timer.NextAll: on systemd one ListUnitsByNames and the next elapses asked for at once), so
// that `status` reads its three timers, and `ps` every listed chamber's wake timer, in one
// exchange with the manager instead of one after another (issue 28). Every answer is still the
// OS's own, read in this command.
type prefetched struct {
	timer.Backend
	ans map[timer.Ref]timer.NextAnswer
}

// prefetch reads refs back at once. A backend that says more than Next (a timer.Reader:
// launchd, Slurm) or that cannot read many at once is left as it is.
func prefetch(ctx context.Context, be timer.Backend, refs []timer.Ref) timer.Backend {
	if _, ok := be.(timer.Reader); ok {
		return be
	}
	if _, ok := be.(timer.AllNexter); !ok || len(refs) == 0 {
		return be
	}
	got := timer.NextAll(ctx, be, refs)
	p := prefetched{Backend: be, ans: map[timer.Ref]timer.NextAnswer{}}
	for i, r := range refs {
		if got[i].Err == nil {
			p.ans[r] = got[i]
		}
	}
	return p
}

// prefetchTimers reads every kind of id's timers back at once (status).
func prefetchTimers(ctx context.Context, be timer.Backend, id string) timer.Backend {
	refs := make([]timer.Ref, len(timer.Kinds))
	for i, k := range timer.Kinds {
		refs[i] = timer.Ref{ID: id, Kind: k}
	}
	return prefetch(ctx, be, refs)
}

// prefetchWakes reads the wake timer of every installed chamber back at once (ps).
func prefetchWakes(ctx context.Context, be timer.Backend, installed []timer.Installed) timer.Backend {
	refs := make([]timer.Ref, 0, len(installed))
	for _, in := range installed {
		refs = append(refs, timer.Ref{ID: in.ID, Kind: timer.Wake})
	}
	return prefetch(ctx, be, refs)
}

// Next answers from what was read together; a timer whose read failed, or that was not read,
// is asked now.
func (p prefetched) Next(ctx context.Context, id string, k timer.Kind) (time.Time, bool, error) {
	if a, ok := p.ans[timer.Ref{ID: id, Kind: k}]; ok {
		return a.At, a.OK, nil
	}
	return p.Backend.Next(ctx, id, k)
}
