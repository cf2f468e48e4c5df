//go:build darwin

package launchdsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

//go:cgo_import_dynamic libc_launch_activate_socket launch_activate_socket "/usr/lib/libSystem.B.dylib"
//go:cgo_import_dynamic libc_free free "/usr/lib/libSystem.B.dylib"

// Addresses of the trampolines in activate_darwin.s.
var launchActivateSocketAddr, freeAddr uintptr

// syscall.syscall is how the standard library calls libSystem on macOS: it switches to the
// system stack and back. golang.org/x/sys/unix links to it the same way.
//
//go:linkname syscall_syscall syscall.syscall
func syscall_syscall(fn, a1, a2, a3 uintptr) (r1, r2 uintptr, err syscall.Errno)

// maxFDs bounds what launchd may hand over for one entry (one per address it resolved).
const maxFDs = 64

// fds calls launch_activate_socket(name, &fds, &count): 0 on success, else an errno value
// (ESRCH: not started by launchd; ENOENT: no such socket entry; EALREADY: taken already).
func fds(name string) ([]int32, error) {
	cname, err := syscall.BytePtrFromString(name)
	if err != nil {
		return nil, err
	}
	var list unsafe.Pointer // int *: an array that launchd allocates and we free
	var count uint64        // size_t
	var pin runtime.Pinner
	pin.Pin(cname)
	pin.Pin(&list)
	pin.Pin(&count)
	defer pin.Unpin()
	r, _, _ := syscall_syscall(launchActivateSocketAddr, uintptr(unsafe.Pointer(cname)), uintptr(unsafe.Pointer(&list)), uintptr(unsafe.Pointer(&count)))
	switch syscall.Errno(r) {
	case 0:
	case syscall.ESRCH, syscall.ENOENT:
		return nil, ErrNotLaunchd
	default:
		return nil, fmt.Errorf("launch_activate_socket(%q): %w", name, syscall.Errno(r))
	}
	if list == nil {
		return nil, nil
	}
	defer syscall_syscall(freeAddr, uintptr(list), 0, 0)
	if count > maxFDs {
		return nil, fmt.Errorf("launch_activate_socket(%q): %d descriptors", name, count)
	}
	// The array is C memory: copy it out before it is freed.
	out := make([]int32, count)
	copy(out, unsafe.Slice((*int32)(list), count))
	return out, nil
}

// Listeners returns a listener for each descriptor of the Sockets entry name, or
// ErrNotLaunchd when launchd did not start this process with that entry.
func Listeners(name string) ([]net.Listener, error) {
	list, err := fds(name)
	if err != nil {
		return nil, err
	}
	var ls []net.Listener
	var errs []error
	for _, fd := range list {
		f := os.NewFile(uintptr(fd), "launchd-"+name)
		l, err := net.FileListener(f) // dups the descriptor
		f.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 && len(errs) > 0 {
		return nil, fmt.Errorf("launchd socket %q: %w", name, errors.Join(errs...))
	}
	return ls, nil
}
