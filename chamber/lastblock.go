package chamber

import (
	"encoding/json"
	"errors"
	"os"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/sessionlog"
)

// blockName (in the private state directory) records the latest block this program closed in
// cryo.log: where it lies (sessionlog.Ref) and its lines that may hold a marker, as the session
// streamed them. It saves every later reader from reading that block again: the next session
// before it appends (checkLog), `validate` (the markers), `status` (the tail), a recovery. A
// block of 500 MB otherwise costs a second of reading each time.
//
// It is a cache, never an authority: every reader first checks it against the log itself
// (sessionlog.Trusted: the boundary lines are there, nothing but notes follows), and reads the
// log when it does not match (a process that died before writing it, a log moved aside, another
// block since). It holds nothing the log does not hold.
// (Its name, blockName, is in store.go.)

// maxRecordedMarkers bounds the marker lines block.json keeps (in bytes of text): an agent that
// prints more is read from the log.
const maxRecordedMarkers = 1 << 20

type markerLine struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

type closedBlock struct {
	sessionlog.Ref
	// Markers are the block's stdout lines that may hold a marker, with their line numbers in
	// the block; Complete is false when there were more than maxRecordedMarkers bytes of them.
	Markers  []markerLine `json:"markers"`
	Complete bool         `json:"complete"`
}

// markerRecorder keeps the marker lines of the running session (see closedBlock).
type markerRecorder struct {
	lines []markerLine
	size  int
	over  bool
}

func (m *markerRecorder) add(n int, text string) {
	if m.over || m.size+len(text) > maxRecordedMarkers {
		m.over, m.lines = true, nil
		return
	}
	m.size += len(text)
	m.lines = append(m.lines, markerLine{N: n, Text: text})
}

// recordBlock writes block.json for the block that was just closed. A failure only costs the
// next reader a read of the block.
func (r *runner) recordBlock(ref sessionlog.Ref, rec *markerRecorder) {
	cb := closedBlock{Ref: ref, Markers: rec.lines, Complete: !rec.over}
	if cb.Markers == nil {
		cb.Markers = []markerLine{}
	}
	data, err := json.Marshal(cb)
	if err == nil {
		err = writeCache(r.store.path(blockName), data)
	}
	if err != nil {
		r.warnf("cannot record where session %d lies in %s (the next reader reads it again): %v", ref.Session, LogFile, err)
	}
}

// writeCache replaces path with data through a temporary file and a rename, without fsync: a
// cache that every reader checks, which a crash may leave old or empty (then unused), never
// half-written. Its fsyncs cost more than the rest of its write on a busy disk.
func writeCache(path string, data []byte) error {
	return atomicfile.WriteNoSync(path, data, 0o600, nil) // the one writer without fsync
}

// closedBlock reads block.json, or nil when there is none or it cannot be used.
func (r *runner) closedBlock() *closedBlock {
	data, err := r.store.read(blockName, 2*maxRecordedMarkers+(64<<10))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.warnf("%v", err)
		}
		return nil
	}
	var cb closedBlock
	if json.Unmarshal(data, &cb) != nil {
		return nil
	}
	return &cb
}

// latestBlock finds the latest block of cryo.log: from block.json when the log still ends with
// that block (without reading it), else by sessionlog.Latest. cb is the record when it was
// used.
func (r *runner) latestBlock() (info *sessionlog.Info, cb *closedBlock, err error) {
	if cb := r.closedBlock(); cb != nil {
		if info, err := sessionlog.Trusted(r.logPath(), cb.Ref); err == nil && info != nil {
			return info, cb, nil
		}
	}
	info, err = sessionlog.Latest(r.logPath(), r.st.LogOffset)
	return info, nil, err
}

// markersOf parses the markers of the block info: from the marker lines block.json recorded
// when cb describes that block and kept them all, else from the log.
func (r *runner) markersOf(info *sessionlog.Info, cb *closedBlock) (*marker.Result, error) {
	if cb == nil || !cb.Complete || cb.Session != info.Session || cb.Offset != info.Offset || cb.Size != info.Size {
		return r.blockMarkers(info)
	}
	p := marker.NewParser(r.cfg.Location)
	for _, l := range cb.Markers {
		p.Line(l.N, l.Text)
	}
	return p.Result(), nil
}
