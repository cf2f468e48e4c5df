//go:build !linux

package confined

import (
	"io/fs"
	"os"
)

// readDir lists the open directory f (os.File.ReadDir lstats each entry in a Root: correct,
// and the only portable way).
func (d *Dir) readDir(f *os.File, dir string) ([]fs.DirEntry, error) {
	return f.ReadDir(-1)
}
