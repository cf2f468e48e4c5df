package chamber

import (
	"encoding/json"
	"io/fs"
	"syscall"
	"time"

	"github.com/cryochamber/cryochamber/message"
)

// outbox-count.json (in the private state directory) records how many messages the live outbox
// held when a status last listed it, with the directory's identity and change times then. The
// live outbox holds up to two months of replies (1,441 files for an hourly chamber): listing it
// was a tenth of a `status` on a five-year chamber, the one part of it that grew with the age.
//
// It is a cache, never an authority: it is used only while the directory is provably the one
// listed, unchanged since. Adding, removing or renaming an entry (a reply, a sync, rotateMailbox,
// the agent in its session) sets the directory's mtime and ctime; the ctime cannot be set back
// by a process (utimes sets it to now). The kernel's timestamps tick coarsely (a jiffy; one or
// two seconds on some file systems), so an entry added in the same tick as the change before the
// listing would leave both unchanged: the record is written, and trusted, only when the listing
// began at least a tick after both (outboxSettle), and the directory's stamp after the listing
// is the one before it (a change during the listing shows whatever the clock of the file
// system's owner, an NFS or FUSE server's, which settled compares ours with). Anything else (no record, another inode or device,
// another time, a record from an older or newer program without these fields) lists as before.
// The agent writes the outbox only inside its session (the cage ends every process at its end),
// and nothing else writes there without changing the times, so a trusted count is the count.
// (Its name, outboxCountName, is in store.go.)

// outboxSettle is how long after the directory's last change a listing must begin for its count
// to be recorded and trusted (see above): two seconds, the coarsest stamps (FAT's mtime; HFS+
// and others tick by the second), unless both stamps show a fraction of a second, which a file
// system that ticks by the second or more never gives (a whole second from a fine one only costs
// a listing). Then outboxSettleFine: Linux stamps from the clock of the last jiffy (10 ms at
// most), exFAT by 10 ms, the rest finer. The fine case is the common one, and the one that lets
// a status soon after a wake (whose session replied) record its count.
const (
	outboxSettle     = 2 * time.Second
	outboxSettleFine = 100 * time.Millisecond
)

type outboxRecord struct {
	Count int `json:"count"`
	dirStamp
	Listed int64 `json:"listed_ns"` // when the listing began (Env.SystemNow, Unix ns)
}

// dirStamp is what identifies one state of a directory.
type dirStamp struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns"`
}

// outboxStamp is the stamp of the directory fi, false when fi is not a directory or says nothing.
func outboxStamp(fi fs.FileInfo) (dirStamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() || st.Ino == 0 {
		return dirStamp{}, false
	}
	return dirStamp{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mtime: fi.ModTime().UnixNano(), Ctime: statCtime(st)}, true
}

// settled reports whether the listing began outboxSettle after the directory's last change.
func (rec outboxRecord) settled() bool {
	settle := int64(outboxSettle)
	if rec.Mtime%1e9 != 0 && rec.Ctime%1e9 != 0 {
		settle = int64(outboxSettleFine)
	}
	return rec.Ino != 0 && rec.Listed-rec.Mtime >= settle && rec.Listed-rec.Ctime >= settle
}

// outboxCount is message.Count of the live outbox: the recorded count while the directory is
// unchanged since it was recorded, else a listing (recorded when it may be).
func (r *runner) outboxCount() (int, error) {
	var before dirStamp
	if fi, err := r.fs.Lstat(outboxDir); err == nil {
		if now, ok := outboxStamp(fi); ok {
			before = now
			var rec outboxRecord
			if data, err := r.store.read(outboxCountName, 4<<10); err == nil && json.Unmarshal(data, &rec) == nil && rec.settled() && rec.dirStamp == now {
				return rec.Count, nil
			}
		}
	}
	if r.env.SystemNow == nil {
		return message.Count(r.fs, outboxDir)
	}
	listed := r.env.SystemNow()
	n, err := message.Count(r.fs, outboxDir)
	if err != nil {
		return 0, err
	}
	r.env.checkpoint("outbox-listed")
	r.recordOutboxCount(n, listed, before)
	return n, nil
}

// recordOutboxCount records n, the count of a listing that began at listed, when a reader would
// trust it: the directory's stamp after the listing is before's, the one before it (a change
// during the listing shows, whatever the clock of the file system's owner: an NFS, SMB or FUSE
// server whose clock lags ours stamps a change during the listing as settled), and settled. A
// failure (no private state directory yet: the chamber was never started) costs the next
// status a listing.
func (r *runner) recordOutboxCount(n int, listed time.Time, before dirStamp) {
	if r.store == "" || r.fs == nil {
		return
	}
	fi, err := r.fs.Lstat(outboxDir)
	if err != nil {
		return
	}
	st, ok := outboxStamp(fi)
	rec := outboxRecord{Count: n, dirStamp: st, Listed: listed.UnixNano()}
	if !ok || st != before || !rec.settled() {
		return
	}
	if data, err := json.Marshal(rec); err == nil && exists(string(r.store)) {
		_ = writeCache(r.store.path(outboxCountName), data)
	}
}
