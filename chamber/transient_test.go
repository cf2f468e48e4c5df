package chamber

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/godbus/dbus/v5"
)

// TestTransientBusError: what a dropped or restarted bus, or a manager that went away under a
// connection kept across a session, answers is tried again; a refusal is not.
func TestTransientBusError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, true},
		{fmt.Errorf("arm: %w", dbus.ErrClosed), true},
		{errors.New("dbus: connection closed by user"), false}, // the words alone are not the error
		{dbus.Error{Name: "org.freedesktop.DBus.Error.NoReply", Body: []any{"Message recipient disconnected from message bus without replying"}}, true},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.NoReply"}, true},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.ServiceUnknown", Body: []any{"The name org.freedesktop.systemd1 was not provided by any .service files"}}, true},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.NameHasNoOwner", Body: []any{"Could not get owner of name 'org.freedesktop.systemd1': no such name"}}, true},
		{dbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit", Body: []any{"Unit cryo-x-wake.timer not loaded."}}, false},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied", Body: []any{"denied"}}, false},
	} {
		if got := transientBusError(c.err); got != c.want {
			t.Errorf("transientBusError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
