package timer

// This file holds the units and the LaunchAgent that let the user manager start the dashboard
// (`cryochamber web`) on demand: the manager listens on the dashboard's addresses and starts
// the server at the first connection; the server exits after some idle minutes and the manager
// goes on listening. So nothing of ours runs between sessions even with the dashboard
// installed. The builders have no build tags, like the chamber units: Linux tests check both.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/coreos/go-systemd/v22/unit"
	"howett.net/plist"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// Names of the dashboard's units and LaunchAgent. They do not start with Prefix (nor with
// LabelPrefix plus a chamber ID), so `ps` never takes them for a chamber's.
const (
	WebSocketUnit  = "cryochamber-web.socket"
	WebServiceUnit = "cryochamber-web.service"
	WebLabel       = "dev.cryochamber-web"
)

// Names of the dashboard's sockets in the LaunchAgent's Sockets dictionary: the server asks
// launchd for each by name (launch_activate_socket).
const (
	WebSocketTCP  = "tcp"
	WebSocketUnix = "unix"
)

// WebServer is the dashboard server that the OS starts on demand.
type WebServer struct {
	// Argv runs the server: the absolute path of the cryochamber binary, then "web" and its
	// flags. The server finds its listening sockets in what the OS passes it.
	Argv []string
	// Listen is the TCP address, a loopback IP literal and a port ("127.0.0.1:7707"). Any
	// other address is refused: the dashboard shows an agent's text and controls its chambers.
	Listen string
	// Socket is the absolute path of the Unix socket; "" for none.
	Socket string
	// Env is PATH and HOME for launchd's EnvironmentVariables (systemd services inherit the
	// user manager's environment).
	Env []string
	// Stdout and Stderr are where launchd writes the server's output.
	Stdout, Stderr string
}

// CheckWebListen refuses a dashboard address that is not a loopback IP literal with a port.
// A host name is refused too: it could resolve to anything.
func CheckWebListen(addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("dashboard address %q: %w", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("dashboard address %q: %q is not an IP address (use 127.0.0.1 or [::1])", addr, host)
	}
	if !ip.IsLoopback() || ip.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("dashboard address %q is not a loopback address: the dashboard only listens on this machine (reach it from elsewhere through an SSH tunnel)", addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("dashboard address %q: port %q is not a number from 1 to 65535", addr, port)
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
}

// SystemdWebUnits builds cryochamber-web.socket, which listens on w.Listen and w.Socket and is
// wanted by sockets.target (so it listens again after a reboot), and cryochamber-web.service,
// which it starts at the first connection. The service has no [Install] section: only the
// socket starts it. The Unix socket is 0600 in a 0700 directory, and removed when the socket
// unit stops.
func SystemdWebUnits(w WebServer) (socket, service []*unit.UnitOption, err error) {
	ap, err := CheckWebListen(w.Listen)
	if err != nil {
		return nil, nil, err
	}
	exec, err := ExecLine(w.Argv)
	if err != nil {
		return nil, nil, fmt.Errorf("dashboard service: %w", err)
	}
	if len("ExecStart=")+len(exec) >= maxUnitLine {
		return nil, nil, fmt.Errorf("dashboard service: ExecStart line is longer than systemd's limit of %d bytes", maxUnitLine)
	}
	socket = []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "cryochamber dashboard: listens, and starts "+WebServiceUnit+" at the first connection"),
		unit.NewUnitOption("Socket", "ListenStream", ap.String()),
	}
	if w.Socket != "" {
		p, err := EscapePath(w.Socket)
		if err != nil {
			return nil, nil, fmt.Errorf("dashboard socket: %w", err)
		}
		socket = append(socket, unit.NewUnitOption("Socket", "ListenStream", p))
	}
	socket = append(socket,
		unit.NewUnitOption("Socket", "SocketMode", "0600"),
		unit.NewUnitOption("Socket", "DirectoryMode", "0700"),
		unit.NewUnitOption("Socket", "RemoveOnStop", "yes"),
		unit.NewUnitOption("Install", "WantedBy", "sockets.target"),
	)
	service = []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "cryochamber dashboard (started on demand by "+WebSocketUnit+"; exits when idle)"),
		unit.NewUnitOption("Unit", "Requires", WebSocketUnit),
		unit.NewUnitOption("Unit", "After", WebSocketUnit),
		unit.NewUnitOption("Service", "ExecStart", exec),
		// cryochamber exits 130 when it is stopped (SIGTERM), as every command does when
		// interrupted: for the dashboard that is a clean stop, not a failure.
		unit.NewUnitOption("Service", "SuccessExitStatus", "130"),
	}
	return socket, service, nil
}

// webAgent is the dashboard's LaunchAgent plist.
type webAgent struct {
	Label                string               `plist:"Label"`
	ProgramArguments     []string             `plist:"ProgramArguments"`
	EnvironmentVariables map[string]string    `plist:"EnvironmentVariables,omitempty"`
	StandardOutPath      string               `plist:"StandardOutPath"`
	StandardErrorPath    string               `plist:"StandardErrorPath"`
	Sockets              map[string]webSocket `plist:"Sockets"`
	// ProcessType "Standard", launchd's default, written out so that the choice is visible:
	// the server answers a person waiting in a browser.
	ProcessType string `plist:"ProcessType"`
}

// webSocket is one entry of Sockets (launchd.plist(5)).
type webSocket struct {
	SockType        string `plist:"SockType"`
	SockNodeName    string `plist:"SockNodeName,omitempty"`
	SockServiceName string `plist:"SockServiceName,omitempty"`
	SockFamily      string `plist:"SockFamily,omitempty"`
	SockPathName    string `plist:"SockPathName,omitempty"`
	// SockPathMode is the Unix socket's mode, in decimal: plists have no octal (0600 = 384).
	SockPathMode int `plist:"SockPathMode,omitempty"`
}

// LaunchdWebPlist builds the dashboard's LaunchAgent: launchd listens on w.Listen (Sockets
// entry "tcp") and w.Socket (entry "unix", mode 0600) and starts w.Argv at the first
// connection. Neither RunAtLoad nor KeepAlive is set: the server runs only on demand.
func LaunchdWebPlist(w WebServer) ([]byte, error) {
	ap, err := CheckWebListen(w.Listen)
	if err != nil {
		return nil, err
	}
	if err := checkArgv(w.Argv); err != nil {
		return nil, fmt.Errorf("dashboard agent: %w", err)
	}
	for _, p := range []struct{ what, path string }{{"stdout path", w.Stdout}, {"stderr path", w.Stderr}} {
		if err := checkPlistPath(p.what, p.path); err != nil {
			return nil, fmt.Errorf("dashboard agent: %w", err)
		}
	}
	env, err := plistEnv(w.Env)
	if err != nil {
		return nil, fmt.Errorf("dashboard agent: %w", err)
	}
	family := "IPv4"
	if ap.Addr().Is6() {
		family = "IPv6"
	}
	a := &webAgent{
		Label:                WebLabel,
		ProgramArguments:     append([]string(nil), w.Argv...),
		EnvironmentVariables: env,
		StandardOutPath:      w.Stdout,
		StandardErrorPath:    w.Stderr,
		ProcessType:          "Standard",
		Sockets: map[string]webSocket{WebSocketTCP: {
			SockType: "stream", SockNodeName: ap.Addr().String(), SockServiceName: strconv.Itoa(int(ap.Port())), SockFamily: family,
		}},
	}
	if w.Socket != "" {
		if err := checkPlistPath("dashboard socket", w.Socket); err != nil {
			return nil, fmt.Errorf("dashboard agent: %w", err)
		}
		a.Sockets[WebSocketUnix] = webSocket{SockType: "stream", SockPathName: w.Socket, SockPathMode: 0o600}
	}
	data, err := plist.MarshalIndent(a, plist.XMLFormat, "\t")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", WebLabel, err)
	}
	return append(data, '\n'), nil
}

// InstallWeb installs the dashboard's socket-activated server with be's OS manager and starts
// listening. A server of an earlier install that is still running is stopped first, so the
// next connection starts the new one.
func InstallWeb(ctx context.Context, be Backend, w WebServer) error {
	switch b := be.(type) {
	case *systemdBackend:
		socket, service, err := SystemdWebUnits(w)
		if err != nil {
			return err
		}
		if err := b.runJob(ctx, "stop", WebServiceUnit, b.conn.StopUnitContext); err != nil && !isNoSuchUnit(err) {
			return err
		}
		return b.installAll(ctx, []unitSet{{deps: map[string][]*unit.UnitOption{WebServiceUnit: service}, name: WebSocketUnit, opts: socket}})
	case *launchdBackend:
		data, err := LaunchdWebPlist(w)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(b.o.AgentsDir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", b.o.AgentsDir, err)
		}
		// bootout also stops a server of an earlier install; launchd keeps no socket of it.
		if err := b.bootout(ctx, WebLabel); err != nil {
			return err
		}
		path := b.plistPath(WebLabel)
		if err := atomicfile.Write(path, data, 0o644); err != nil {
			return err
		}
		return b.bootstrap(ctx, WebLabel, path)
	}
	return fmt.Errorf("the %s backend cannot start the dashboard on demand", be.Name())
}

// UninstallWeb stops the dashboard's server and its sockets and removes its files. Removing
// what is not installed is not an error.
func UninstallWeb(ctx context.Context, be Backend) error {
	switch b := be.(type) {
	case *systemdBackend:
		if err := b.runJob(ctx, "stop", WebServiceUnit, b.conn.StopUnitContext); err != nil && !isNoSuchUnit(err) {
			return err
		}
		return b.uninstall(ctx, WebSocketUnit, WebServiceUnit)
	case *launchdBackend:
		if err := b.bootout(ctx, WebLabel); err != nil {
			return err
		}
		if err := os.Remove(b.plistPath(WebLabel)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return atomicfile.SyncDir(filepath.Dir(b.plistPath(WebLabel)))
	}
	return fmt.Errorf("the %s backend cannot start the dashboard on demand", be.Name())
}
