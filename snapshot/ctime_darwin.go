package snapshot

import "syscall"

// ctime is the inode's change time in nanoseconds (see ctime_linux.go).
func ctime(st *syscall.Stat_t) int64 { return st.Ctimespec.Sec*1e9 + st.Ctimespec.Nsec }
