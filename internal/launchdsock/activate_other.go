//go:build !darwin

package launchdsock

import "net"

// Listeners reports ErrNotLaunchd: launchd exists only on macOS.
func Listeners(name string) ([]net.Listener, error) { return nil, ErrNotLaunchd }
