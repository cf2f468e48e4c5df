// Package atomicfile writes files so that a reader, or a process that starts after a crash,
// sees either the old content or the new content, never a mix or a truncated file.
//
// It follows restic's local backend: write a temporary file in the same directory, fsync it,
// close it, rename it over the target, then fsync the directory so the rename itself is durable.
// It never writes in place and never leaves a temporary file behind on an error it can see.
// WriteNoSync skips both fsyncs, for a record that a missing or empty file does no harm to: it
// keeps the promise against a killed process, not against a power cut.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data, with the given permission bits.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteHook(path, data, perm, nil)
}

// WriteHook is Write with a hook called after the temporary file is written and synced and
// before it is renamed over path: the crash tests kill the process there.
func WriteHook(path string, data []byte, perm os.FileMode, beforeRename func()) error {
	return write(path, data, perm, beforeRename, true)
}

// WriteNoSync replaces path with data like WriteHook, atomically (temporary file, rename), but
// without either fsync. Readers in the same boot see the old content or the new, never a mix,
// also after the writer was killed (the page cache outlives the process). After a power cut or
// a kernel crash the file may hold the old content, the new, or nothing (missing, or empty):
// only for a record whose every reader takes those to mean "no record" (the chamber's
// agent.json: the agent it names died with the machine; block.json, a cache its reader checks).
func WriteNoSync(path string, data []byte, perm os.FileMode, beforeRename func()) error {
	return write(path, data, perm, beforeRename, false)
}

func write(path string, data []byte, perm os.FileMode, beforeRename func(), sync bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	// CreateTemp makes the file 0600; set the wanted mode before any data lands, so a secret
	// is never readable by others even for an instant.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("write %s: fsync: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	ok = true
	if !sync {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// RemoveStale removes temporary files that Write left in dir for name when its process died
// between creating and renaming them. Only the lock holder may call it.
func RemoveStale(dir, name string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "."+name+".tmp-*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}
