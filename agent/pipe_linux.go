package agent

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// growPipe asks for a pipe of size bytes behind r, when r is the read end of a pipe (os/exec
// hands its copy the *os.File wrapped so that only Read and the File's other methods show).
// The kernel caps it at /proc/sys/fs/pipe-max-size (1 MiB by default) and may refuse it (a
// user over pipe-user-pages-soft): the pipe then stays as it was.
func growPipe(r io.Reader, size int) {
	sc, ok := r.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size)
	})
}
