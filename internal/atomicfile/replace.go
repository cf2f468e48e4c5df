package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Replace is WriteHook without the two fsyncs: a reader, or a process that starts after this one
// was killed, still sees the old content or the new, never a mix (temporary file, rename); only
// a crash of the machine may leave the old content. It is for a save whose loss to a power cut
// loses nothing (issue 28: what the state records while the agent runs, whose processes a
// power cut ends anyway), never for what recovery needs.
func Replace(path string, data []byte, perm os.FileMode, beforeRename func()) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
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
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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
	return nil
}
