package chamber

import (
	"context"
	"time"

	"github.com/cryochamber/cryochamber/timer"
)

// prefetched is a backend whose Next answers for one chamber's timers were read together
// (timer.NextAll: on systemd one ListUnitsByNames and the next elapses asked for at once), so
// that `status` reads its three timers in one exchange with the manager instead of one after
// another (issue 28). Every answer is still the OS's own, read in this command.
type prefetched struct {
	timer.Backend
	id  string
	ans map[timer.Kind]timer.NextAnswer
}

// prefetchTimers reads every kind of id's timers back at once. A backend that says more than
// Next (a timer.Reader: launchd, Slurm) is left as it is: its Read is what status shows.
func prefetchTimers(ctx context.Context, be timer.Backend, id string) timer.Backend {
	if _, ok := be.(timer.Reader); ok {
		return be
	}
	if _, ok := be.(timer.AllNexter); !ok {
		return be
	}
	refs := make([]timer.Ref, len(timer.Kinds))
	for i, k := range timer.Kinds {
		refs[i] = timer.Ref{ID: id, Kind: k}
	}
	got := timer.NextAll(ctx, be, refs)
	p := prefetched{Backend: be, id: id, ans: map[timer.Kind]timer.NextAnswer{}}
	for i, r := range refs {
		if got[i].Err == nil {
			p.ans[r.Kind] = got[i]
		}
	}
	return p
}

// Next answers from what was read together; a timer whose read failed is asked again.
func (p prefetched) Next(ctx context.Context, id string, k timer.Kind) (time.Time, bool, error) {
	if a, ok := p.ans[k]; ok && id == p.id {
		return a.At, a.OK, nil
	}
	return p.Backend.Next(ctx, id, k)
}
