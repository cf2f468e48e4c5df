package timer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/godbus/dbus/v5"
)

// IsTransient goes by the errors' types: the same words in a plain error are not a dropped bus.
func TestIsTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, true},
		{fmt.Errorf("arm: %w", dbus.ErrClosed), true},
		{fmt.Errorf("read: %w", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{fmt.Errorf("write: %w", syscall.EPIPE), true},
		{fmt.Errorf("dial: %w", ErrUnavailable), true},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.NoReply", Body: []any{"Message recipient disconnected from message bus without replying"}}, true},
		{fmt.Errorf("start: %w", &dbus.Error{Name: "org.freedesktop.DBus.Error.NoReply"}), true},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.ServiceUnknown", Body: []any{"The name org.freedesktop.systemd1 was not provided by any .service files"}}, true},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.NameHasNoOwner", Body: []any{"Could not get owner of name 'org.freedesktop.systemd1': no such name"}}, true},
		{dbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit", Body: []any{"Unit cryo-x-wake.timer not loaded."}}, false},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied", Body: []any{"denied: connection closed"}}, false},
		{errors.New("an agent printed: dbus: connection closed by user, EOF, broken pipe"), false},
	} {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
