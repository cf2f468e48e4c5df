package confined

import (
	"encoding/binary"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// readDir lists the open directory f (the entry dir of the Dir) with getdents(2), taking each
// entry's type from the listing. os.File.ReadDir on a file opened in an os.Root lstats every
// entry instead (Go 1.26), which for a mailbox of a few thousand messages was most of the cost
// of `status`. An entry whose type the file system does not report (DT_UNKNOWN) is lstat'ed.
func (d *Dir) readDir(f *os.File, dir string) ([]fs.DirEntry, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var out []fs.DirEntry
	buf := make([]byte, 32<<10)
	var rerr error
	for {
		n := 0
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Getdents(int(fd), buf)
			return rerr != unix.EAGAIN
		}); err != nil {
			return nil, err
		}
		if rerr != nil {
			return nil, &os.PathError{Op: "getdents", Path: dir, Err: rerr}
		}
		if n <= 0 {
			return out, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, &os.PathError{Op: "getdents", Path: dir, Err: unix.EIO}
			}
			ino, typ, name := binary.NativeEndian.Uint64(b[0:8]), b[18], b[19:reclen]
			b = b[reclen:]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if ino == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			e := &dirEntry{d: d, dir: dir, name: string(name)}
			switch typ {
			case unix.DT_REG:
			case unix.DT_DIR:
				e.typ = fs.ModeDir
			case unix.DT_LNK:
				e.typ = fs.ModeSymlink
			case unix.DT_FIFO:
				e.typ = fs.ModeNamedPipe
			case unix.DT_SOCK:
				e.typ = fs.ModeSocket
			case unix.DT_CHR:
				e.typ = fs.ModeDevice | fs.ModeCharDevice
			case unix.DT_BLK:
				e.typ = fs.ModeDevice
			default:
				fi, err := e.Info()
				if err != nil {
					if os.IsNotExist(err) {
						continue // gone since the listing
					}
					return nil, err
				}
				e.typ = fi.Mode().Type()
			}
			out = append(out, e)
		}
	}
}

// dirEntry is an entry whose type came from the directory listing itself; Info asks the root.
type dirEntry struct {
	d         *Dir
	dir, name string
	typ       fs.FileMode
}

func (e *dirEntry) Name() string               { return e.name }
func (e *dirEntry) IsDir() bool                { return e.typ.IsDir() }
func (e *dirEntry) Type() fs.FileMode          { return e.typ }
func (e *dirEntry) Info() (fs.FileInfo, error) { return e.d.root.Lstat(path.Join(e.dir, e.name)) }
func (e *dirEntry) String() string             { return fs.FormatDirEntry(e) }
