package confined

import (
	"fmt"
	"io"
	"os"
)

// ReadAll reads r to its end, refusing more than limit bytes (ErrTooLarge): the one bounded
// read, for every file whose size is not ours to choose (a chamber file, the private state, a
// unit, a plist, the system's zone). name says what r is, in the error.
func ReadAll(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w (more than %d bytes)", name, ErrTooLarge, limit)
	}
	return data, nil
}

// ReadPath reads the file at path whole with ReadAll. It is not confined: it is for files no
// agent can write (the private state directory, the user manager's units, launchd's plists,
// /etc/localtime); a chamber file is read with Dir.ReadFile.
func ReadPath(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, path, limit)
}
