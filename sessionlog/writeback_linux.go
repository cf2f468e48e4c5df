package sessionlog

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the last n bytes of f (opened for appending)
// to disk, without waiting for it (sync_file_range with SYNC_FILE_RANGE_WRITE). It is only a
// hint: a failure changes nothing, and the fsync at End still makes the block durable; it makes
// that fsync short after a session that printed hundreds of megabytes.
func startWriteback(f *os.File, n int64) {
	fi, err := f.Stat()
	if err != nil {
		return
	}
	end := fi.Size()
	_ = unix.SyncFileRange(int(f.Fd()), max(end-n, 0), n, unix.SYNC_FILE_RANGE_WRITE)
}
