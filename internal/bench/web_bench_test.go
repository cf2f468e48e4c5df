package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The dashboard as a user meets it: a real `cryochamber web` process (the foreground server,
// as `cryochamber web` starts it from a shell, or the user manager at the first visit), asked
// by a real HTTP client for the URL it printed, the token in the URL as the browser sends it
// (the pages' links carry it on). BenchmarkFiveYears measures the chamber page of the
// five-year chamber against the fresh one's; BenchmarkChambers the overview of its largest
// manager's chambers.

// dashboard is a running `cryochamber web`.
type dashboard struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	token  string // from the URL it printed
	client *http.Client
	done   chan struct{} // closed when the process has exited
	stderr tailBuffer
}

// startDashboard starts `cryochamber web` with env (the manager's: its HOME holds the registry
// of the chambers it lists) on a free loopback port, without the Unix socket, and waits for the
// URL it prints. The process is stopped with Ctrl-C's signal at the end of the benchmark, or
// by stop.
func startDashboard(tb testing.TB, env []string) *dashboard {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d := &dashboard{done: make(chan struct{})}
	d.cmd = exec.Command(bin, "web", "--listen", addr, "--socket", "off")
	d.cmd.Env = env
	d.cmd.Stderr = &d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		tb.Fatalf("start cryochamber web: %v", err)
	}
	tb.Cleanup(func() { d.stop(tb) })
	// Its stdout: "cryochamber web: listening on ...", then "open: URL"; the rest is drained.
	opened := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "open: "); ok && !sent {
				opened <- u
				sent = true
			}
		}
		if !sent {
			close(opened)
		}
		io.Copy(io.Discard, out)
		d.cmd.Wait()
		close(d.done)
	}()
	var printed string
	select {
	case u, ok := <-opened:
		if !ok {
			<-d.done
			tb.Fatalf("cryochamber web exited without printing its URL:\n%s", d.stderr.b)
		}
		printed = u
	case <-time.After(30 * time.Second):
		tb.Fatalf("cryochamber web printed no URL within 30 s:\n%s", d.stderr.b)
	}
	u, err := url.Parse(printed)
	if err != nil || u.Query().Get("token") == "" {
		tb.Fatalf("cryochamber web printed %q: not a URL with a token (%v)", printed, err)
	}
	d.base, d.token = u.Scheme+"://"+u.Host, u.Query().Get("token")
	// One client per server, as one browser: the first request connects, the next ones reuse
	// the connection (keep-alive).
	d.client = &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
	return d
}

// stop ends the server as Ctrl-C does, and waits for it (killing it after 10 s).
func (d *dashboard) stop(tb testing.TB) {
	select {
	case <-d.done:
		return
	default:
	}
	d.client.CloseIdleConnections()
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		tb.Logf("cryochamber web did not stop within 10 s of SIGINT: killed")
	}
}

// get asks for path (the token added to its query, as the page's links carry it) and returns
// the time from sending the request to the last byte of the answer, and the answer. Anything
// but 200 fails the benchmark.
func (d *dashboard) get(tb testing.TB, path string) (time.Duration, string) {
	tb.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	req, err := http.NewRequest("GET", d.base+path+sep+"token="+url.QueryEscape(d.token), nil)
	if err != nil {
		tb.Fatal(err)
	}
	t0 := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		tb.Fatalf("GET %s: %v\n%s", path, err, d.stderr.b)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	wall := time.Since(t0)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s\n%.2000s\n%s", path, resp.Status, body, d.stderr.b)
	}
	return wall, string(body)
}

// chamberPage asks for the dashboard's page of the chamber at dir and checks that it is that
// chamber's page, with its timeline.
func (d *dashboard) chamberPage(tb testing.TB, id, dir string) time.Duration {
	tb.Helper()
	wall, body := d.get(tb, "/c/"+id)
	if !strings.Contains(body, `<div class="dir muted">`+dir+`</div>`) || !strings.Contains(body, "?session=") {
		tb.Fatalf("GET /c/%s: not the page of %s with its sessions:\n%.3000s", id, dir, body)
	}
	return wall
}

// overview asks for the overview and checks that it lists n chambers, each linked to its page.
func (d *dashboard) overview(tb testing.TB, n int) time.Duration {
	tb.Helper()
	wall, body := d.get(tb, "/")
	if got := strings.Count(body, `<a class="name" href="/c/cryo-`); got != n {
		tb.Fatalf("GET /: %d chambers linked, want %d:\n%.3000s", got, n, body)
	}
	return wall
}

// msSpread is a spread of absolute times (in ms) for the table's columns: a figure that is not
// a ratio (paired_bench_test.go's cells print ratios).
func msSpread(d []time.Duration, loads []float64) spread {
	x := make([]float64, len(d))
	for i, v := range d {
		x[i] = float64(v) / float64(time.Millisecond)
	}
	return spreadOf(x, loads)
}

// recordAbsolute adds a row whose value is a median time over n runs, with the spread of the
// times in ms (min–max, IQR) and the load over them.
func recordAbsolute(group int, metric, what, value string, s spread, target string, met *bool) {
	rc, _, lc := s.cells()
	sc := ""
	if s.n > 0 {
		sc = fmt.Sprintf("%s–%s ms (IQR %s–%s)", fms(s.min), fms(s.max), fms(s.q1), fms(s.q3))
	}
	recordRow(row{group: group, metric: metric, what: what, value: value, rounds: rc, spread: sc, load: lc, loadAt: s.loadMed, target: target}, met)
}

// fms prints milliseconds as ms does, without the unit.
func fms(f float64) string {
	return strings.TrimSuffix(ms(time.Duration(f*float64(time.Millisecond))), " ms")
}

// dashboardOverview measures the overview of the n chambers of the manager whose environment
// is env, as a user meets it: in each round a new `cryochamber web` (the foreground server
// just started, or the one the user manager starts at a visit), the first visit (a new
// connection; every chamber's status asked), then the page again at once (within the 30 s the
// server remembers the statuses of unchanged chambers). Absolute times: there is nothing to
// pair them with.
func dashboardOverview(b *testing.B, env []string, n, rounds int) {
	var first, again []time.Duration
	var loads []float64
	for i := 0; i < rounds; i++ {
		loads = append(loads, load1())
		d := startDashboard(b, env)
		first = append(first, d.overview(b, n))
		again = append(again, d.overview(b, n))
		d.stop(b)
	}
	what := fmt.Sprintf("%d chambers in the user manager; a new `cryochamber web` per round, GET / with the token in the URL", n)
	for _, c := range []struct {
		metric string
		d      []time.Duration
	}{
		{"dashboard overview, first visit (whole process: `cryochamber web`, HTTP GET; every status asked)", first},
		{"dashboard overview, again at once (the statuses of unchanged chambers remembered for 30 s)", again},
	} {
		med := median(append([]time.Duration(nil), c.d...))
		recordAbsolute(groupChambers, c.metric, what, fmt.Sprintf("%s (median of %d)", ms(med), len(c.d)),
			msSpread(c.d, loads), "< 50 ms at load 6 (the load it ran at is beside it)", ok(med < 50*time.Millisecond))
	}
}
