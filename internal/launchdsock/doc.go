// Package launchdsock takes over the listening sockets that launchd opened for a LaunchAgent's
// Sockets entries (launch_activate_socket(3)), so that `cryochamber web` can be started on
// demand on macOS as systemd's socket activation starts it on Linux.
//
// It calls libSystem without cgo, the way the standard library and golang.org/x/sys/unix do
// on macOS (a dynamic import and an assembly trampoline), so that cryochamber still builds for
// macOS from any machine. It never opens a socket itself; off macOS it only reports that
// launchd does not exist.
package launchdsock

import "errors"

// ErrNotLaunchd means the process was not started by launchd for a job with that socket:
// the caller opens its own listeners instead.
var ErrNotLaunchd = errors.New("not started by launchd with this socket")
