package binary

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e"
	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// diskScript runs the trials inside a private mount namespace: the chamber and the private
// state directory (XDG_STATE_HOME) live on one small tmpfs, as they share one disk on a real
// machine, and the log can be bound read-only. Each step's exit status and output go to $OUT,
// which is outside the namespace.
const diskScript = `
set -u
step() { name=$1; shift; "$@" > "$OUT/$name.out" 2>&1; echo $? > "$OUT/$name.code"; }
snapshot() { cp "$XDG_STATE_HOME"/cryochamber/chambers/*/state.json "$OUT/$1.state.json" 2>/dev/null; cp "$MNT/cryo.log" "$OUT/$1.cryo.log" 2>/dev/null; ls "$MNT/messages/inbox" | grep '\.md$' > "$OUT/$1.inbox"; ls "$MNT/messages/inbox/archive" > "$OUT/$1.archive"; ls "$MNT/messages/outbox" > "$OUT/$1.outbox"; }
mount -t tmpfs -o size=8m tmpfs "$MNT" || exit 90
cp -a "$SRC/." "$MNT/" || exit 91
mkdir -p "$XDG_STATE_HOME"
cd "$MNT"

# 1. Low disk: min_free_disk is above what the tmpfs has: step 8 warns, the chamber hibernates.
step start "$BIN" start "$MNT/plan.md"
snapshot start

# 2. A full disk: every write fails with ENOSPC. The sender is told; a wake cannot record
#    anything, fails loudly, and the alert still reaches the webhook.
dd if=/dev/zero of="$MNT/filler" bs=64k >/dev/null 2>&1
step send-full "$BIN" send --dir "$MNT" "while full"
step wake-full "$BIN" wake --dir "$MNT" --now
snapshot full
rm -f "$MNT/filler"

# 3. With space again, a message waits and a wake works.
step send "$BIN" send --dir "$MNT" "after the disk was freed"
step wake-ok "$BIN" wake --dir "$MNT" --now
snapshot ok

# 4. A read-only log: the next session cannot write it, so it did not run: it is retried (here
#    every slow_retry, with an alert at once: max_retries = 0), the message it claimed is
#    answered, and the log keeps every byte it had.
step send2 "$BIN" send --dir "$MNT" "before the log went read-only"
mount --bind "$MNT/cryo.log" "$MNT/cryo.log" && mount -o remount,bind,ro "$MNT/cryo.log" || exit 92
step wake-ro "$BIN" wake --dir "$MNT" --now
snapshot ro
step validate-ro "$BIN" validate --dir "$MNT"
umount "$MNT/cryo.log"

# 5. The dead-man on a full disk: a wake dies in the middle of its session (SIGKILL), the disk
#    fills up, and the dead-man's alert still reaches the webhook.
step crash env CRYOCHAMBER_CRASH_AT=header "$BIN" wake --dir "$MNT" --now
dd if=/dev/zero of="$MNT/filler" bs=64k >/dev/null 2>&1
step fallback-full "$BIN" fallback --dir "$MNT"
rm -f "$MNT/filler"
step recover "$BIN" wake --dir "$MNT"

# 6. messages/ unwritable (the outbox bound read-only): the same, and the alert still arrives.
step crash2 env CRYOCHAMBER_CRASH_AT=header "$BIN" wake --dir "$MNT" --now
mount --bind "$MNT/messages/outbox" "$MNT/messages/outbox" && mount -o remount,bind,ro "$MNT/messages/outbox" || exit 93
step fallback-ro "$BIN" fallback --dir "$MNT"
umount "$MNT/messages/outbox"
step cancel "$BIN" cancel --dir "$MNT"
exit 0
`

// TestDiskTrouble: a full disk, a read-only log and a read-only outbox never stop a plan in
// silence (issue 12, item 1): the state and the log stay as they were, and the alert arrives,
// the dead-man's too, because delivery needs nothing from the disk.
func TestDiskTrouble(t *testing.T) {
	t.Parallel()
	m := systemdtest.Start(t)
	e2e.LookPath(t, "unshare", "util-linux")
	var mu sync.Mutex
	var hooks []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		hooks = append(hooks, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	work := t.TempDir()
	src := filepath.Join(work, "src")
	mnt := filepath.Join(work, "mnt")
	out := filepath.Join(work, "out")
	for _, d := range []string{src, mnt, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	agent := `#!/bin/sh
echo "[CRYO:EXIT 0] ok"
echo "[CRYO:WAKE +1h]"
case "$*" in *"Messages claimed"*) echo '[CRYO:REPLY "got it"]';; esac
`
	toml := "agent = \"./agent.sh\"\nwatch_inbox = false\nmin_free_disk = \"1GiB\"\nmax_retries = 0\n\n[[fallback]]\naction = \"webhook\"\ntarget = \"" + srv.URL + "/hook\"\n"
	fixture.WriteFiles(t, src, fixture.Files{"plan.md": "x\n", "cryo.toml": toml, "agent.sh": agent})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-m", "sh", "-c", diskScript)
	cmd.Env = fixture.Env(m, "BIN="+fixture.Binary(), "SRC="+src, "MNT="+mnt, "OUT="+out, "XDG_STATE_HOME="+filepath.Join(mnt, ".state"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the trial script failed: %v\n%s", err, b)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return string(b)
	}
	expect := func(step, code string, wants ...string) {
		t.Helper()
		if got := strings.TrimSpace(read(step + ".code")); got != code {
			t.Errorf("%s exited %s, want %s:\n%s", step, got, code, read(step+".out"))
		}
		for _, w := range wants {
			if !strings.Contains(read(step+".out"), w) {
				t.Errorf("%s output lacks %q:\n%s", step, w, read(step+".out"))
			}
		}
	}
	hook := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hooks {
			if strings.Contains(h, want) {
				return true
			}
		}
		return false
	}
	// 1. Low disk warns, and hibernates.
	expect("start", "0", "WARN  ", "below min_free_disk 1.0 GiB", "hibernating: session 2")
	// 2. Full disk: loud failures, nothing changed, and the alert arrived.
	expect("send-full", "2", "cryochamber: cannot write the message", "no space left on device")
	expect("wake-full", "1", "cryochamber: cannot save the state", "no space left on device", "alert (disk): webhook http://127.0.0.1")
	if !hook(`"reason":"disk"`) || !hook("session 2 cannot start") || !hook("free space") {
		t.Errorf("the full-disk alert did not reach the webhook: %q", hooks)
	}
	if read("start.state.json") != read("full.state.json") || read("start.state.json") == "" {
		t.Error("the state changed while the disk was full")
	}
	// The log gained at most notes between blocks (the alert's), never a block.
	if full := read("full.cryo.log"); !strings.HasPrefix(full, read("start.cryo.log")) || strings.Contains(strings.TrimPrefix(full, read("start.cryo.log")), "--- CRYO") {
		t.Errorf("cryo.log changed while the disk was full:\n%s", full)
	}
	// 3. Space again: the message is claimed and answered.
	expect("send", "0")
	expect("wake-ok", "0", "session 2: EXIT 0")
	if strings.TrimSpace(read("ok.inbox")) != "" || !strings.Contains(read("ok.archive"), ".md") {
		t.Errorf("after the wake the inbox holds %q, the archive %q", read("ok.inbox"), read("ok.archive"))
	}
	// 4. Read-only log: the session did not run; it is retried, the operator alerted, the
	//    message answered, and the log is byte for byte what it was.
	expect("wake-ro", "1", "session 3 failed (log)", "read-only file system", "retrying every 6h", "alert (log): webhook http://127.0.0.1")
	if read("ok.cryo.log") != read("ro.cryo.log") {
		t.Error("the read-only log changed")
	}
	if !strings.Contains(read("ro.state.json"), `"phase": "armed"`) || !strings.Contains(read("ro.state.json"), `"retrying_since"`) {
		t.Errorf("the state after the failure:\n%s", read("ro.state.json"))
	}
	if !hook(`"reason":"log"`) || !hook("read-only file system") {
		t.Errorf("the read-only-log alert did not reach the webhook: %q", hooks)
	}
	if n := len(strings.Fields(read("ro.outbox"))) - len(strings.Fields(read("ok.outbox"))); n < 2 {
		t.Errorf("want a reply and an alert in the outbox, got %d new files:\n%s", n, read("ro.outbox"))
	}
	expect("validate-ro", "1", "step 7 log writable", "read-only file system")
	// 5 and 6. The dead-man alerts a session whose process died, on a full disk and with the
	//    outbox read-only: one "crashed" alert each.
	expect("crash", "137")
	expect("fallback-full", "1", "alert (crashed): webhook http://127.0.0.1")
	expect("crash2", "137")
	expect("fallback-ro", "1", "alert (crashed): webhook http://127.0.0.1", "cannot copy the alert to messages/outbox")
	mu.Lock()
	crashed := 0
	for _, h := range hooks {
		if strings.Contains(h, `"reason":"crashed"`) {
			crashed++
		}
	}
	mu.Unlock()
	if crashed != 2 {
		t.Errorf("%d crashed alerts reached the webhook, want 2 (full disk, read-only outbox)", crashed)
	}
	expect("cancel", "0")
	if units, _ := filepath.Glob(filepath.Join(m.UnitDir, "cryo-*")); len(units) != 0 {
		t.Errorf("units left: %v", units)
	}
}
