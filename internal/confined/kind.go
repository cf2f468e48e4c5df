package confined

import "io/fs"

// TypeWord is one word for the type t of a directory entry (fs.FileMode.Type()): "file",
// "directory", "symlink", "fifo", "socket", "device" or "other". A record keeps it (the
// fingerprint of CLI configuration); messages use Kind. The one namer of file types.
func TypeWord(t fs.FileMode) string {
	switch {
	case t.IsRegular():
		return "file"
	case t.IsDir():
		return "directory"
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t&fs.ModeNamedPipe != 0:
		return "fifo"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}

// Kind names what an entry of type t is, for messages: "a plain file", "a directory", "a
// symlink", "a FIFO", "a socket", "a device", or "not a regular file".
func Kind(t fs.FileMode) string {
	switch w := TypeWord(t); w {
	case "file":
		return "a plain file"
	case "fifo":
		return "a FIFO"
	case "other":
		return "not a regular file"
	default:
		return "a " + w
	}
}
