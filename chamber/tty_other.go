//go:build !linux

package chamber

import "golang.org/x/sys/unix"

// isTerminal reports whether fd is a terminal (for red in status and ps).
func isTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TIOCGETA)
	return err == nil
}
