package chamber

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/validate"
)

// busyRefuser stands in for a user manager that first does not answer in time, and then
// answers every request slowly (1.1 s: a manager busy with many chambers at its start) with a
// refusal (a masked unit). Only what armPatiently reaches is answered; the end-to-end trial
// with the real manager is TestSilent3_11RefusedAfterWakeFellDue.
type busyRefuser struct {
	timer.Backend
	mu    sync.Mutex
	calls int
}

func (b *busyRefuser) Name() string { return "systemd" }
func (b *busyRefuser) Close() error { return nil }
func (b *busyRefuser) Arm(ctx context.Context, c timer.Chamber, jobs ...timer.Job) error {
	b.mu.Lock()
	b.calls++
	first := b.calls <= 2 // the first try: with the dead-man, then the wake alone (arm)
	b.mu.Unlock()
	if first {
		return context.DeadlineExceeded
	}
	time.Sleep(1100 * time.Millisecond)
	return errors.New("unit " + c.ID + "-wake.timer is masked")
}

// A WAKE that fell due while the manager did not answer is moved to the arming lead from then;
// a refusal after that must refuse, even when each try took over a second. Before (the review
// of round 1), the refusal was judged against the arming lead from its end, so a try of a
// second looked as if it had waited past the wake: it was retried for armPatience (5 minutes),
// then the plan kept with nothing armed.
func TestArmPatientlyRefusalAfterMovedWake(t *testing.T) {
	t.Parallel()
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	r.env.Now = time.Now // the retries are timed by the real clock
	be := &busyRefuser{}
	r.env.OpenBackend = func(context.Context, string) (timer.Backend, error) { return be, nil }
	wake := time.Now().Add(-10 * time.Second).UTC().Truncate(time.Second)
	type result struct {
		err  error
		wake time.Time
	}
	done := make(chan result, 1)
	go func() {
		w := wake
		_, release, err := r.armPatiently(context.Background(), &finishing{n: 3}, validate.New(nil), &w)
		release()
		done <- result{err, w}
	}()
	select {
	case res := <-done:
		if res.err == nil {
			t.Fatalf("a refusal was kept (nil error), wake %s", res.wake)
		}
		if !res.wake.After(wake) {
			t.Errorf("the wake that fell due was not moved: %s", res.wake)
		}
	case <-time.After(40 * time.Second):
		be.mu.Lock()
		n := be.calls
		be.mu.Unlock()
		t.Fatalf("a refusal after the moved wake is still retried after 40 s (%d arms): taken for a try that waited past the wake", n)
	}
}
