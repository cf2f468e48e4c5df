package timer

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/godbus/dbus/v5"
)

// IsTransient reports an error that a bus which dropped its connection or restarted returns,
// or a manager that went away under a connection kept across a session (its re-exec or
// restart), as opposed to a refusal: trying again on a new connection may succeed. It reads
// the errors' types (godbus's ErrClosed and dbus.Error names, io.EOF, a closed or reset
// socket), never their text; the backends wrap what they return with %w.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, dbus.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	var name string
	var de dbus.Error
	var dp *dbus.Error
	switch {
	case errors.As(err, &de):
		name = de.Name
	case errors.As(err, &dp):
		name = dp.Name
	}
	switch name {
	case "org.freedesktop.DBus.Error.NoReply", // "Remote peer disconnected", "disconnected from message bus without replying"
		"org.freedesktop.DBus.Error.ServiceUnknown", // the manager's name is not on the bus (yet)
		"org.freedesktop.DBus.Error.NameHasNoOwner", // nor owned by anyone
		"org.freedesktop.DBus.Error.Disconnected":
		return true
	}
	return false
}
