package chamber

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// StateCache keeps the states `ps` parsed, each against its state file's identity (inode,
// size, modification time): a dashboard that lists a hundred chambers at every visit parses
// only the states that changed since (issue 28). Every save of a state renames a new file into
// place, so a changed state is a new inode. What a row says besides the state (whether the
// directory exists, the holder's process, the wake timer read back from the OS) is looked at
// afresh at every listing. A nil *StateCache caches nothing.
type StateCache struct {
	mu sync.Mutex
	m  map[string]cachedState
}

type cachedState struct {
	ino, size int64
	mtime     time.Time
	st        *State
}

// NewStateCache is an empty cache, for PsOptions.States.
func NewStateCache() *StateCache { return &StateCache{m: map[string]cachedState{}} }

// load is loadStateAt, answered from the cache while the state file is the one parsed.
func (c *StateCache) load(env *Env, dir string) (*State, error) {
	if c == nil {
		return loadStateAt(env, dir)
	}
	s, err := storeFor(env, chamberID(dir))
	if err != nil {
		return nil, err
	}
	path := s.path(stateName)
	fi, err := os.Stat(path)
	if err != nil {
		c.forget(path)
		return s.load() // it says why (no state, unreadable)
	}
	var ino int64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = int64(st.Ino)
	}
	c.mu.Lock()
	e, ok := c.m[path]
	c.mu.Unlock()
	if ok && e.ino == ino && e.size == fi.Size() && e.mtime.Equal(fi.ModTime()) {
		return e.st, nil
	}
	st, err := s.load()
	if err != nil {
		c.forget(path)
		return nil, err
	}
	c.mu.Lock()
	c.m[path] = cachedState{ino: ino, size: fi.Size(), mtime: fi.ModTime(), st: st}
	c.mu.Unlock()
	return st, nil
}

func (c *StateCache) forget(path string) {
	c.mu.Lock()
	delete(c.m, path)
	c.mu.Unlock()
}
