package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/urfave/cli/v2"

	"github.com/cryochamber/cryochamber/chamber"
	"github.com/cryochamber/cryochamber/internal/launchdsock"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/web"
)

// Defaults of `cryochamber web`.
const (
	defaultWebListen = "127.0.0.1:7707"
	defaultWebIdle   = 5 * time.Minute // when the OS started the server on demand
)

func webCommand(env *chamber.Env) *cli.Command {
	return &cli.Command{
		Name:  "web",
		Usage: "a dashboard of every chamber in the browser (foreground; --install: started on demand)",
		Description: `Serves a dashboard on this machine only: one page with every chamber of this user
(what ` + "`cryochamber ps`" + ` finds), and a page per chamber with its state, upcoming wakes,
messages and a box to send one, the latest session streaming live, the timeline of sessions,
its markers and checks, and buttons to wake it now, move its next wake, pause, resume or
cancel it. A JSON API under /api/ answers with the same fields as the CLI's --json (see the
README).

   cryochamber web              serve until Ctrl-C; prints the URL to open
   cryochamber web --install    let the user manager listen and start the server at the
                                first visit; it exits after --idle without visits
   cryochamber web --url        print the URL (with the token) of the installed dashboard
                                (its --listen address, recorded at --install)
   cryochamber web --uninstall  remove what --install installed

It listens on 127.0.0.1 and on a Unix socket (0600). Every request needs the token kept in
$XDG_STATE_HOME/cryochamber/web/token (0600): the printed URL carries it and the pages' links
carry it on (never a cookie, which every port of 127.0.0.1 would receive); scripts send it in
the X-Cryo-Token header, and changes are only made by POST with that header.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: defaultWebListen, Usage: "loopback `ADDRESS:PORT` to listen on (127.0.0.1 or [::1] only)"},
			&cli.StringFlag{Name: "socket", Usage: "Unix socket `PATH` to listen on too (default $XDG_RUNTIME_DIR/cryochamber/web.sock; \"off\" for none)"},
			&cli.DurationFlag{Name: "idle", Usage: "exit after this long without a request (default: never in the foreground, 5m when started on demand)"},
			&cli.BoolFlag{Name: "install", Usage: "let the user manager start the dashboard on demand (systemd socket units; a launchd agent with Sockets)"},
			&cli.BoolFlag{Name: "uninstall", Usage: "remove the on-demand dashboard"},
			&cli.BoolFlag{Name: "url", Usage: "print the dashboard's URL with its token, and exit"},
			&cli.StringFlag{Name: "backend", Usage: "for --install: systemd or launchd (default: by OS)"},
			&cli.StringFlag{Name: "state-dir", Usage: "the cryochamber state `DIR` (default $XDG_STATE_HOME/cryochamber); --install writes it into the unit"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			n := 0
			for _, f := range []string{"install", "uninstall", "url"} {
				if c.Bool(f) {
					n++
				}
			}
			if n > 1 {
				return &usageError{"--install, --uninstall and --url go one at a time", "see `cryochamber web --help`"}
			}
			opts := webOptions{Listen: c.String("listen"), Socket: c.String("socket"), Install: c.Bool("install"),
				Uninstall: c.Bool("uninstall"), URL: c.Bool("url"), Backend: c.String("backend"), StateDir: c.String("state-dir"),
				ListenSet: c.IsSet("listen")}
			if c.IsSet("idle") {
				d := c.Duration("idle")
				if d <= 0 {
					return &usageError{"--idle must be a positive duration", "for example --idle 5m"}
				}
				opts.Idle = &d
			}
			return runWeb(c.Context, env, opts)
		},
	}
}

type webOptions struct {
	Listen    string
	Socket    string // "" default, "off" none
	Idle      *time.Duration
	Install   bool
	Uninstall bool
	URL       bool
	ListenSet bool // --listen given: --url prints it rather than the installed address
	Backend   string
	StateDir  string
}

func runWeb(ctx context.Context, env *chamber.Env, opts webOptions) error {
	if opts.StateDir != "" {
		if !filepath.IsAbs(opts.StateDir) {
			return &usageError{"--state-dir must be an absolute path", ""}
		}
		env.StateDir, env.Registry = opts.StateDir, filepath.Join(opts.StateDir, "registry")
	}
	if env.StateDir == "" {
		return &usageError{"no state directory: neither XDG_STATE_HOME nor HOME is set", "set HOME, or pass --state-dir"}
	}
	if opts.URL && !opts.ListenSet {
		if addr := installedWebListen(env.StateDir); addr != "" {
			opts.Listen = addr
		}
	}
	ap, err := timer.CheckWebListen(opts.Listen)
	if err != nil {
		return &usageError{err.Error(), "for example --listen 127.0.0.1:7707"}
	}
	socket, err := webSocketPath(env, opts.Socket)
	if err != nil {
		return err
	}
	if opts.Uninstall {
		return uninstallWeb(ctx, env, opts)
	}
	token, err := web.LoadToken(filepath.Join(env.StateDir, "web", "token"))
	if err != nil {
		return &chamber.Error{Msg: "cannot read the dashboard's token", Err: err}
	}
	url := "http://" + ap.String() + "/?token=" + token
	switch {
	case opts.URL:
		fmt.Fprintln(env.Stdout, url)
		return nil
	case opts.Install:
		return installWeb(ctx, env, opts, ap.String(), socket, url)
	}

	ls, activated, err := webListeners(ap.String(), socket)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	idle := time.Duration(0)
	if activated {
		idle = defaultWebIdle
	}
	if opts.Idle != nil {
		idle = *opts.Idle
	}
	srv, err := web.New(web.Options{Source: web.NewSource(env), Token: token, Now: env.Now, Log: env.Stderr})
	if err != nil {
		return err
	}
	var where []string
	for _, l := range ls {
		where = append(where, l.Addr().Network()+" "+l.Addr().String())
	}
	if activated {
		fmt.Fprintf(env.Stdout, "cryochamber web: started on demand, listening on %s; exits after %s idle\n", strings.Join(where, " and "), idle)
	} else {
		fmt.Fprintf(env.Stdout, "cryochamber web: listening on %s (Ctrl-C to stop)\nopen: %s\n", strings.Join(where, " and "), url)
	}
	err = srv.Serve(ctx, ls, idle)
	switch {
	case errors.Is(err, web.ErrIdle):
		fmt.Fprintf(env.Stdout, "cryochamber web: no request for %s: exiting\n", idle)
		return nil
	case err != nil:
		return &chamber.Error{Msg: "the dashboard stopped", Err: err}
	}
	return nil
}

// webSocketPath is the Unix socket the dashboard listens on ("" for none): --socket, else in
// $XDG_RUNTIME_DIR (a tmpfs only this user can enter), else in the state directory.
func webSocketPath(env *chamber.Env, flag string) (string, error) {
	switch {
	case flag == "off":
		return "", nil
	case flag != "":
		if !filepath.IsAbs(flag) {
			return "", &usageError{"--socket must be an absolute path (or off)", ""}
		}
		return filepath.Clean(flag), nil
	}
	if rt := env.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		return filepath.Join(rt, "cryochamber", "web.sock"), nil
	}
	return filepath.Join(env.StateDir, "web", "web.sock"), nil
}

// webListeners returns the sockets the OS passed when it started us on demand (systemd's
// LISTEN_FDS, launchd's Sockets), or opens the listen address and the Unix socket.
func webListeners(addr, socket string) (ls []net.Listener, activated bool, err error) {
	if fs, err := activation.Listeners(); err == nil && len(fs) > 0 {
		for _, l := range fs {
			if l != nil {
				ls = append(ls, l)
			}
		}
		return ls, true, checkLoopback(ls)
	}
	for _, name := range []string{timer.WebSocketTCP, timer.WebSocketUnix} {
		got, err := launchdsock.Listeners(name)
		if err != nil && !errors.Is(err, launchdsock.ErrNotLaunchd) {
			return nil, false, &chamber.Error{Msg: "cannot take the sockets launchd opened", Err: err}
		}
		ls = append(ls, got...)
	}
	if len(ls) > 0 {
		return ls, true, checkLoopback(ls)
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, false, &chamber.Error{Msg: "cannot listen on " + addr, Err: err,
			Hint: "is the dashboard running already (`cryochamber web --url` prints the address of an installed one)? or choose another port with --listen 127.0.0.1:PORT"}
	}
	ls = append(ls, tcp)
	if socket != "" {
		u, err := listenUnix(socket)
		if err != nil {
			tcp.Close()
			return nil, false, err
		}
		ls = append(ls, u)
	}
	return ls, false, nil
}

// checkLoopback refuses a TCP socket passed by the OS that is not on a loopback address (a
// unit edited by hand): the dashboard controls every chamber of this user.
func checkLoopback(ls []net.Listener) error {
	for _, l := range ls {
		if a, ok := l.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			return &chamber.Error{Kind: chamber.Usage, Msg: fmt.Sprintf("the OS passed a socket on %s, which is not a loopback address", a), Hint: "run `cryochamber web --install` again to rewrite the units"}
		}
	}
	return nil
}

// listenUnix listens on a Unix socket of mode 0600 in a directory of mode 0700. A socket file
// left by a server that died is replaced; one that answers is another server.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, &chamber.Error{Msg: "cannot create the socket's directory", Err: err}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, &chamber.Error{Msg: path + " exists and is not a socket", Hint: "remove it, or choose another path with --socket"}
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, &chamber.Error{Msg: "another dashboard answers on " + path, Hint: "stop it, or use --socket off"}
		}
		_ = os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, &chamber.Error{Msg: "cannot listen on " + path, Err: err, Hint: "choose another path with --socket, or --socket off"}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, &chamber.Error{Err: err}
	}
	return l, nil
}

// webBinary checks that the binary the OS will start can stay where it is.
func webBinary(bin string) error {
	if bin == "" || strings.Contains(bin, "/go-build") || strings.Contains(bin, "/go/pkg/mod/") {
		return &usageError{fmt.Sprintf("cryochamber is running from a temporary build (%s): the dashboard would be started from a file that `go` deletes", bin),
			"install it (make install, or copy bin/cryochamber to ~/.local/bin), then run web --install again"}
	}
	return nil
}

func installWeb(ctx context.Context, env *chamber.Env, opts webOptions, addr, socket, url string) error {
	if err := webBinary(env.Binary); err != nil {
		return err
	}
	idle := defaultWebIdle
	if opts.Idle != nil {
		idle = *opts.Idle
	}
	sockArg := socket
	if sockArg == "" {
		sockArg = "off"
	}
	w := timer.WebServer{
		Argv:   []string{env.Binary, "web", "--listen", addr, "--socket", sockArg, "--idle", idle.String(), "--state-dir", env.StateDir},
		Listen: addr,
		Socket: socket,
		Stdout: filepath.Join(env.StateDir, "web", "web.log"),
		Stderr: filepath.Join(env.StateDir, "web", "web.log"),
	}
	for _, k := range []string{"PATH", "HOME"} {
		if v := env.Getenv(k); v != "" {
			w.Env = append(w.Env, k+"="+v)
		}
	}
	if socket != "" {
		if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
			return &chamber.Error{Err: err}
		}
	}
	be, err := env.OpenBackend(ctx, opts.Backend)
	if err != nil {
		return &chamber.Error{Msg: "cannot reach the OS timer manager", Err: err}
	}
	defer be.Close()
	if err := timer.InstallWeb(ctx, be, w); err != nil {
		// Leave nothing half installed (a socket unit that failed to listen, say).
		if uerr := timer.UninstallWeb(context.WithoutCancel(ctx), be); uerr != nil {
			fmt.Fprintf(env.Stderr, "cryochamber: warning: removing what was installed: %v\n", uerr)
		}
		hint := "is another program listening on " + addr + "? choose another port with --listen 127.0.0.1:PORT"
		return &chamber.Error{Msg: "cannot install the dashboard", Err: err, Hint: hint}
	}
	if err := recordWebListen(env.StateDir, addr); err != nil {
		fmt.Fprintf(env.Stderr, "cryochamber: warning: cannot record the address for `web --url`: %v\n", err)
	}
	how := "systemctl --user status " + timer.WebSocketUnit
	if be.Name() == "launchd" {
		how = "launchctl print gui/" + fmt.Sprint(os.Getuid()) + "/" + timer.WebLabel
	}
	fmt.Fprintf(env.Stdout, "the %s user manager now listens on %s", be.Name(), addr)
	if socket != "" {
		fmt.Fprintf(env.Stdout, " and %s", socket)
	}
	fmt.Fprintf(env.Stdout, ";\nit starts the dashboard at the first visit, which exits after %s without one (%s)\nopen: %s\n", idle, how, url)
	return nil
}

func uninstallWeb(ctx context.Context, env *chamber.Env, opts webOptions) error {
	be, err := env.OpenBackend(ctx, opts.Backend)
	if err != nil {
		return &chamber.Error{Msg: "cannot reach the OS timer manager", Err: err}
	}
	defer be.Close()
	if err := timer.UninstallWeb(ctx, be); err != nil {
		return &chamber.Error{Msg: "cannot remove the dashboard", Err: err}
	}
	if err := forgetWebListen(env.StateDir); err != nil {
		fmt.Fprintf(env.Stderr, "cryochamber: warning: %v\n", err)
	}
	fmt.Fprintln(env.Stdout, "removed the on-demand dashboard")
	return nil
}
