package confined

import (
	"io/fs"
	"testing"
)

func TestKind(t *testing.T) {
	for _, tc := range []struct {
		t          fs.FileMode
		word, kind string
	}{
		{0, "file", "a plain file"},
		{fs.ModeDir, "directory", "a directory"},
		{fs.ModeSymlink, "symlink", "a symlink"},
		{fs.ModeNamedPipe, "fifo", "a FIFO"},
		{fs.ModeSocket, "socket", "a socket"},
		{fs.ModeDevice, "device", "a device"},
		{fs.ModeDevice | fs.ModeCharDevice, "device", "a device"},
		{fs.ModeIrregular, "other", "not a regular file"},
	} {
		if w, k := TypeWord(tc.t), Kind(tc.t); w != tc.word || k != tc.kind {
			t.Errorf("%v: TypeWord %q, Kind %q; want %q, %q", tc.t, w, k, tc.word, tc.kind)
		}
	}
}
