package chamber

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// outboxFixture is a runner whose listing clock (Env.SystemNow) the test sets, with n messages in the live outbox.
func outboxFixture(t *testing.T, n int) (r *runner, clock *time.Time, add func(name string)) {
	t.Helper()
	r = testRunner(t, "agent = \"/bin/true\"\n", t0)
	c := time.Now()
	clock = &c
	r.env.SystemNow = func() time.Time { return *clock }
	dir := filepath.Join(r.dir, outboxDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	add = func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		add(time.Unix(int64(i), 0).UTC().Format("20060102T150405") + "-reply.md")
	}
	return r, clock, add
}

func (r *runner) outboxRecordFor(t *testing.T) (outboxRecord, bool) {
	t.Helper()
	data, err := os.ReadFile(r.store.path(outboxCountName))
	if os.IsNotExist(err) {
		return outboxRecord{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var rec outboxRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec, true
}

func (r *runner) setOutboxRecord(t *testing.T, rec outboxRecord) {
	t.Helper()
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(r.store.path(outboxCountName), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustCount(t *testing.T, r *runner) int {
	t.Helper()
	n, err := r.outboxCount()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A status after a recorded count does not list the outbox while it is unchanged: the count it
// shows is the recorded one (here falsified to 99, which no listing gives), and the true count
// once a message was added.
func TestOutboxCountRecorded(t *testing.T) {
	t.Parallel()
	r, clock, add := outboxFixture(t, 3)
	*clock = time.Now().Add(outboxSettle + time.Second)
	if got := mustCount(t, r); got != 3 {
		t.Fatalf("first count = %d, want 3", got)
	}
	rec, ok := r.outboxRecordFor(t)
	if !ok || rec.Count != 3 {
		t.Fatalf("recorded %+v (%v), want a count of 3", rec, ok)
	}
	rec.Count = 99
	r.setOutboxRecord(t, rec)
	if got := mustCount(t, r); got != 99 {
		t.Fatalf("count with an unchanged outbox = %d, want the recorded 99 (it listed the directory)", got)
	}
	add("20261123T100000-new.md")
	*clock = time.Now().Add(outboxSettle + time.Second)
	if got := mustCount(t, r); got != 4 {
		t.Fatalf("count after a message was added = %d, want 4", got)
	}
	if rec, _ := r.outboxRecordFor(t); rec.Count != 4 {
		t.Fatalf("recorded %d after the new listing, want 4", rec.Count)
	}
}

// A listing that began within outboxSettle of the directory's last change is neither recorded
// nor, if a record says so, trusted: a message added in the same tick would not show.
func TestOutboxCountTooSoon(t *testing.T) {
	t.Parallel()
	r, clock, _ := outboxFixture(t, 2)
	*clock = time.Now() // just after the messages were written
	if got := mustCount(t, r); got != 2 {
		t.Fatalf("count = %d, want 2", got)
	}
	if rec, ok := r.outboxRecordFor(t); ok {
		t.Fatalf("recorded %+v for a listing within %s of the change", rec, outboxSettle)
	}
	fi, err := r.fs.Lstat(outboxDir)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := outboxStamp(fi)
	if !ok {
		t.Fatal("no stamp for the outbox")
	}
	if st.Mtime%1e9 == 0 || st.Ctime%1e9 == 0 {
		t.Skip("this file system stamps whole seconds (or the stamp fell on one): the fine case cannot be shown here")
	}
	rec := outboxRecord{Count: 99, dirStamp: st, Listed: max(st.Ctime, st.Mtime) + int64(outboxSettleFine)/2}
	r.setOutboxRecord(t, rec)
	if got := mustCount(t, r); got != 2 {
		t.Fatalf("count with a record listed %s after the change = %d, want the listing's 2", outboxSettleFine/2, got)
	}
	// The same record, settled, is trusted: the case above failed for its time alone.
	rec.Listed = max(st.Ctime, st.Mtime) + int64(outboxSettleFine)
	r.setOutboxRecord(t, rec)
	if got := mustCount(t, r); got != 99 {
		t.Fatalf("count with a settled record = %d, want 99", got)
	}
	// Stamps in whole seconds may come from a file system that ticks by the second or two: a
	// listing one second after is not settled there, two seconds is.
	whole := time.Unix(st.Ctime/1e9-10, 0)
	if err := os.Chtimes(filepath.Join(r.dir, outboxDir), whole, whole); err != nil {
		t.Fatal(err)
	}
	fi, _ = r.fs.Lstat(outboxDir)
	st, _ = outboxStamp(fi)
	for _, c := range []struct {
		after time.Duration
		want  int
	}{{time.Second, 2}, {outboxSettle, 99}} {
		r.setOutboxRecord(t, outboxRecord{Count: 99, dirStamp: st, Listed: max(st.Ctime, st.Mtime) + int64(c.after)})
		if st.Mtime%1e9 != 0 {
			t.Fatalf("mtime %d after Chtimes to a whole second", st.Mtime)
		}
		if got := mustCount(t, r); got != c.want {
			t.Fatalf("whole-second mtime, listed %s after: count = %d, want %d", c.after, got, c.want)
		}
	}
	// Another directory in its place (another inode) is listed.
	if err := os.Rename(filepath.Join(r.dir, outboxDir), filepath.Join(r.dir, "messages/old")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, outboxDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := mustCount(t, r); got != 0 {
		t.Fatalf("count of a new outbox = %d, want 0", got)
	}
}

// Status shows the live outbox's count through the record: the same number in its JSON as a
// listing gives, before and after a record, and the new number once a message was added.
func TestStatusOutboxCount(t *testing.T) {
	t.Parallel()
	r, clock, add := outboxFixture(t, 3)
	for name, data := range map[string]string{"cryo.toml": "agent = \"/bin/true\"\n", "plan.md": "# plan\n"} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.save(); err != nil {
		t.Fatal(err)
	}
	status := func() int {
		t.Helper()
		*clock = time.Now().Add(outboxSettle + time.Second)
		s, err := Status(context.Background(), r.env, StatusOptions{Dir: r.dir, Quick: true})
		if err != nil {
			t.Fatal(err)
		}
		var j struct {
			Outbox *int `json:"outbox"`
		}
		data, _ := json.Marshal(s)
		if err := json.Unmarshal(data, &j); err != nil || j.Outbox == nil {
			t.Fatalf("status JSON without \"outbox\": %s", data)
		}
		return *j.Outbox
	}
	for i, want := range []int{3, 3} { // the first lists and records, the second reads the record
		if got := status(); got != want {
			t.Fatalf("status %d: outbox = %d, want %d", i+1, got, want)
		}
	}
	if rec, ok := r.outboxRecordFor(t); !ok || rec.Count != 3 {
		t.Fatalf("status recorded %+v (%v), want 3", rec, ok)
	} else {
		rec.Count = 99 // a number no listing gives: proof that the next status did not list
		r.setOutboxRecord(t, rec)
	}
	if got := status(); got != 99 {
		t.Fatalf("outbox with an unchanged directory = %d, want the recorded 99", got)
	}
	add("20261123T100000-new.md")
	if got := status(); got != 4 {
		t.Fatalf("outbox after a reply = %d, want 4", got)
	}
}

// A message added during the listing is never recorded as counted, whatever the clocks: here
// ours is far ahead of the directory's stamps (a file server whose clock lags ours), so the
// stamp after the listing looks settled. The next count must list again and see it. Before (the
// review of round 1) the stamp after the listing was recorded with the listing's count, and the
// status showed the old count until the outbox changed again.
func TestOutboxCountChangedDuringListing(t *testing.T) {
	t.Parallel()
	r, clock, add := outboxFixture(t, 3)
	*clock = time.Now().Add(time.Hour)
	added := false
	r.env.Checkpoint = func(name string) {
		if name == "outbox-listed" && !added {
			added = true
			add("20261123T100000-new.md")
		}
	}
	if got := mustCount(t, r); got != 3 {
		t.Fatalf("first count = %d, want the listing's 3", got)
	}
	if !added {
		t.Fatal("no message was added during the listing: the test does not try what it says")
	}
	if rec, ok := r.outboxRecordFor(t); ok {
		t.Errorf("recorded %+v for a listing the outbox changed during", rec)
	}
	if got := mustCount(t, r); got != 4 {
		t.Fatalf("count after a message was added during the last listing = %d, want 4", got)
	}
}

// The count's temporary file, left by a status killed while recording it, is removed by the
// next lock holder, like the state's.
func TestRemoveStaleOutboxCountTemp(t *testing.T) {
	t.Parallel()
	r := testRunner(t, "agent = \"/bin/true\"\n", t0)
	tmp := filepath.Join(string(r.store), "."+outboxCountName+".tmp-123")
	if err := os.WriteFile(tmp, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.removeStale()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temporary outbox-count.json is still there: %v", err)
	}
}
