package snapshot

import "syscall"

// ctime is the inode's change time in nanoseconds: no program can set it, so a file rewritten
// to its old size and mtime still shows as changed.
func ctime(st *syscall.Stat_t) int64 { return st.Ctim.Sec*1e9 + st.Ctim.Nsec }
