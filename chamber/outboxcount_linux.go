package chamber

import "syscall"

// statCtime is the inode change time of st, in Unix nanoseconds (outboxcount.go).
func statCtime(st *syscall.Stat_t) int64 { return st.Ctim.Sec*1e9 + st.Ctim.Nsec }
