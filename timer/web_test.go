package timer

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"howett.net/plist"
)

func TestCheckWebListen(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7707":       "",
		"127.0.0.2:80":         "",
		"[::1]:7707":           "",
		"[::ffff:127.0.0.1]:1": "",
		"0.0.0.0:7707":         "is not a loopback address",
		"192.168.1.20:7707":    "is not a loopback address",
		"[::]:7707":            "is not a loopback address",
		"[fe80::1%eth0]:80":    "is not a loopback address",
		"localhost:7707":       "is not an IP address",
		"example.com:80":       "is not an IP address",
		"127.0.0.1":            "missing port",
		"127.0.0.1:0":          "is not a number from 1 to 65535",
		"127.0.0.1:65536":      "is not a number from 1 to 65535",
		"127.0.0.1:http":       "is not a number from 1 to 65535",
	} {
		_, err := CheckWebListen(addr)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", addr, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want an error saying %q", addr, err, want)
		}
	}
}

// webFixtures are the golden dashboards: a plain one, and one whose every path holds what
// systemd and XML would otherwise expand, split or unquote.
func webFixtures() []struct {
	name string
	w    WebServer
} {
	mk := func(bin, listen, sock, state string) WebServer {
		return WebServer{
			Argv:   []string{bin, "web", "--listen", listen, "--socket", sock, "--idle", "5m0s", "--state-dir", state},
			Listen: listen, Socket: sock,
			Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/alice"},
			Stdout: filepath.Join(state, "web", "web.log"), Stderr: filepath.Join(state, "web", "web.log"),
		}
	}
	return []struct {
		name string
		w    WebServer
	}{
		{"plain", mk("/usr/local/bin/cryochamber", "127.0.0.1:7707", "/run/user/1000/cryochamber/web.sock", "/home/alice/.local/state/cryochamber")},
		{"awkward", mk("/opt/cryo chamber 100% é/bin/cryochamber", "[::1]:8080",
			`/run/user/1000/my 100% "web" $HOME ${X} [x]*?.sock`, `/home/alice/state 100% "q" 'a' $HOME \ é`)},
	}
}

func TestWebGolden(t *testing.T) {
	for _, g := range webFixtures() {
		t.Run(g.name, func(t *testing.T) {
			sock, svc, err := SystemdWebUnits(g.w)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := LaunchdWebPlist(g.w)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{WebSocketUnit: mustSerialize(t, sock), WebServiceUnit: mustSerialize(t, svc), LaunchdPlistName(WebLabel): pl}
			dir := filepath.Join("testdata", "web", g.name)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, data := range files {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			for name, data := range files {
				want, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatalf("%v (run with -update to create the golden files)", err)
				}
				if !bytes.Equal(data, want) {
					t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, data, want)
				}
			}
			// systemd reads back exactly the argv and the socket path that were meant.
			for _, o := range svc {
				if o.Name == "ExecStart" {
					argv, err := UnquoteExec(o.Value)
					if err != nil || !reflect.DeepEqual(argv, g.w.Argv) {
						t.Errorf("ExecStart reads back as %q, %v", argv, err)
					}
				}
			}
			var listens []string
			for _, o := range sock {
				if o.Name == "ListenStream" {
					listens = append(listens, strings.ReplaceAll(o.Value, "%%", "%"))
				}
			}
			ap, _ := CheckWebListen(g.w.Listen)
			if !reflect.DeepEqual(listens, []string{ap.String(), g.w.Socket}) {
				t.Errorf("ListenStream= %q", listens)
			}
			// launchd reads the same argv, addresses and mode.
			var got webAgent
			if _, err := plist.Unmarshal(pl, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.ProgramArguments, g.w.Argv) || got.Sockets[WebSocketUnix].SockPathName != g.w.Socket ||
				got.Sockets[WebSocketUnix].SockPathMode != 0o600 || got.Sockets[WebSocketTCP].SockServiceName != strings.TrimPrefix(g.w.Listen[strings.LastIndex(g.w.Listen, ":"):], ":") {
				t.Errorf("the plist reads back as %+v", got)
			}
			verifyUnits(t, map[string][]byte{WebSocketUnit: files[WebSocketUnit], WebServiceUnit: files[WebServiceUnit]}, g.w.Argv[0])
			plistRoundTrip(t, pl)
		})
	}
}

// plistRoundTrip proves a plist well formed: plistutil turns it into a binary plist and back,
// and both decode to what it says.
func plistRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	bin, err := exec.LookPath("plistutil")
	if err != nil {
		t.Skip("plistutil not found (Debian package libplist-utils): cannot prove the plist well formed")
	}
	tmp := t.TempDir()
	src, binPath, xmlPath := filepath.Join(tmp, "x.plist"), filepath.Join(tmp, "x.bin"), filepath.Join(tmp, "x.xml")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-i", src, "-o", binPath, "-f", "bin"}, {"-i", binPath, "-o", xmlPath, "-f", "xml"}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("plistutil %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var orig, viaBin, viaXML map[string]any
	for _, d := range []struct {
		path string
		into *map[string]any
	}{{src, &orig}, {binPath, &viaBin}, {xmlPath, &viaXML}} {
		b, err := os.ReadFile(d.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plist.Unmarshal(b, d.into); err != nil {
			t.Fatalf("decode %s: %v", d.path, err)
		}
	}
	if !reflect.DeepEqual(orig, viaBin) || !reflect.DeepEqual(orig, viaXML) {
		t.Errorf("plistutil changed the plist:\norig %#v\nbin  %#v\nxml  %#v", orig, viaBin, viaXML)
	}
}

func TestWebUnitsRefuse(t *testing.T) {
	base := webFixtures()[0].w
	with := func(f func(w *WebServer)) WebServer {
		w := base
		w.Argv = append([]string(nil), base.Argv...)
		w.Env = append([]string(nil), base.Env...)
		f(&w)
		return w
	}
	cases := []struct {
		name    string
		w       WebServer
		systemd string // "" = accepted
		launchd string
	}{
		{"any address", with(func(w *WebServer) { w.Listen = "0.0.0.0:7707" }), "not a loopback address", "not a loopback address"},
		{"a host name", with(func(w *WebServer) { w.Listen = "localhost:7707" }), "not an IP address", "not an IP address"},
		{"a relative socket", with(func(w *WebServer) { w.Socket = "run/web.sock" }), "is not absolute", "is not absolute"},
		{"a socket with a newline", with(func(w *WebServer) { w.Socket = "/run/a\nListenStream=0.0.0.0:80" }), "line break", "line break"},
		{"a socket ending in a space", with(func(w *WebServer) { w.Socket = "/run/web.sock " }), "ends in whitespace", ""},
		{"a binary with a quote", with(func(w *WebServer) { w.Argv[0] = `/opt/x"y/cryochamber` }), "cannot express", ""},
		{"an argument with a newline", with(func(w *WebServer) { w.Argv[2] = "a\n[Service]" }), "line break", "line break"},
		{"a secret in the plist", with(func(w *WebServer) { w.Env = append(w.Env, "TOKEN=x") }), "", "only PATH, HOME and XDG_STATE_HOME"},
		{"a relative log", with(func(w *WebServer) { w.Stdout = "web.log" }), "", "is not absolute"},
	}
	for _, c := range cases {
		_, _, err := SystemdWebUnits(c.w)
		if c.systemd == "" && err != nil || c.systemd != "" && (err == nil || !strings.Contains(err.Error(), c.systemd)) {
			t.Errorf("%s: SystemdWebUnits: %v, want %q", c.name, err, c.systemd)
		}
		_, err = LaunchdWebPlist(c.w)
		if c.launchd == "" && err != nil || c.launchd != "" && (err == nil || !strings.Contains(err.Error(), c.launchd)) {
			t.Errorf("%s: LaunchdWebPlist: %v, want %q", c.name, err, c.launchd)
		}
	}
	// Without a Unix socket, the units listen on TCP alone.
	sock, _, err := SystemdWebUnits(with(func(w *WebServer) { w.Socket = "" }))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range sock {
		if o.Name == "ListenStream" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d ListenStream= without a socket: %s", n, mustSerialize(t, sock))
	}
	// The dashboard's names never look like a chamber's.
	for _, name := range []string{WebSocketUnit, WebServiceUnit} {
		if strings.HasPrefix(name, Prefix) {
			t.Errorf("%s starts with %s: ps would list it", name, Prefix)
		}
	}
	if _, _, _, ok := plistRole(LaunchdPlistName(WebLabel)); ok {
		t.Errorf("%s looks like a chamber's plist", WebLabel)
	}
}
