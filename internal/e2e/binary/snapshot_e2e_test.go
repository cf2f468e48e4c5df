package binary

// Issue 27, end to end against a real systemd user manager: an agent that creates, edits,
// deletes and renames files over three sessions; `diff --session 2` shows exactly session 2's
// changes; `rollback --to-session 1` restores every byte and the next session sees it (and is
// told); a second rollback undoes the first; a 20 MB file is left out and listed; a rollback
// during a session is refused; and the chamber, a git repository with hooks and
// core.fsmonitor that write a marker file, never has any of them run.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
	"github.com/cryochamber/cryochamber/timer"
	"github.com/cryochamber/cryochamber/timer/systemdtest"
)

// chamberHash is the test's own hash of the chamber's files (path, kind, mode's exec bit,
// content), leaving out cryochamber's own files, .git, and the names in skip: what a rollback
// must restore, measured without the code under test.
func chamberHash(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	h := sha256.New()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		top := strings.Split(rel, "/")[0]
		for _, own := range append([]string{"cryo.log", "timer.json", "todo.json", ".cryo", "messages", ".git"}, skip...) {
			if top == own || rel == own {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var content []byte
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			content = []byte("link:" + tgt)
		default:
			if content, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		sum := sha256.Sum256(content)
		lines = append(lines, fmt.Sprintf("%s %v %s", rel, fi.Mode()&0o111 != 0, hex.EncodeToString(sum[:])))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	h.Write([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h.Sum(nil))
}

// snapshotTrees reads the snapshot index in the chamber's private state: the tree of each
// snapshot, by "session N" and "rollback to N" (the latest of each).
func snapshotTrees(t *testing.T, m *systemdtest.Manager, dir string) map[string]string {
	t.Helper()
	real, _ := filepath.EvalSymlinks(dir)
	data, err := os.ReadFile(filepath.Join(fixture.StateDir(m), "chambers", timer.ID(real), "snapshots", "snapshots.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Kind        string
			Session, To int
			Tree        string
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		switch e.Kind {
		case "session":
			out[fmt.Sprintf("session %d", e.Session)] = e.Tree
		case "rollback":
			out[fmt.Sprintf("rollback to %d", e.To)] = e.Tree
		}
	}
	return out
}

func TestSnapshotsDiffRollback(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	m := systemdtest.Start(t)
	// Sessions 1-3 work on the files; later sessions only report what they see, outside the
	// chamber, in a directory the cage lets them write ([sandbox] writable; not under /tmp,
	// which is the cage's own); a session started while "hold" exists waits for "release"
	// (bounded).
	outside := filepath.Join(m.Home, "out")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := `#!/bin/sh
set -e
OUT=` + outside + `
for last; do :; done
printf '%s\n' "$last" > "$OUT/prompt-$CRYO_SESSION.txt"
case "$CRYO_SESSION" in
1)
	printf 'v1\n' > notes.txt
	mkdir -p sub
	printf 'a\n' > sub/a.txt
	printf 'old\n' > old.txt
	printf '\000\001\002\377binary one' > bin.dat
	;;
2)
	printf 'v2\n' > notes.txt
	rm old.txt
	mv sub/a.txt sub/b.txt
	printf '\000\001\002\377binary two' > bin.dat
	head -c 20000000 /dev/zero > big.bin
	;;
3)
	printf 'v3\n' > notes.txt
	mkdir -p sub/deeper
	printf 'new\n' > sub/deeper/new.txt
	;;
*)
	cat notes.txt > "$OUT/seen-$CRYO_SESSION.txt" 2>&1 || echo missing > "$OUT/seen-$CRYO_SESSION.txt"
	ls sub >> "$OUT/seen-$CRYO_SESSION.txt"
	if [ -e "$OUT/hold" ]; then
		touch "$OUT/running"
		i=0
		while [ ! -e "$OUT/release" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	fi
	;;
esac
echo "[CRYO:EXIT 0] ok"
echo "[CRYO:WAKE +1h]"
`
	dir := fixture.Chamber(t, "agent = \"./agent.sh\"\nwatch_inbox = false\n\n[sandbox]\nwritable = [\""+outside+"\"]\n", agent, nil)
	// The chamber is a git repository whose hooks and fsmonitor leave a marker when run.
	marker := filepath.Join(outside, "hook-ran")
	if out, err := exec.Command(git, "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	hook := "#!/bin/sh\necho \"$0 $*\" >> " + marker + "\n"
	for _, h := range []string{"pre-commit", "post-commit", "post-checkout", "reference-transaction", "pre-auto-gc", "post-index-change", "fsmonitor"} {
		fixture.WriteFile(t, filepath.Join(dir, ".git", "hooks", h), hook)
		if err := os.Chmod(filepath.Join(dir, ".git", "hooks", h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(cfg, "[core]\n\tfsmonitor = %s\n\thooksPath = %s\n[diff]\n\texternal = %s\n",
		filepath.Join(dir, ".git/hooks/fsmonitor"), filepath.Join(dir, ".git/hooks"), filepath.Join(dir, ".git/hooks/fsmonitor"))
	cfg.Close()

	env := fixture.Env(m)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	hash1 := chamberHash(t, dir)
	fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--now")
	fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--now")
	hash3 := chamberHash(t, dir, "big.bin")

	// diff --session 2: exactly session 2's changes, the 20 MB file listed as left out.
	out := fixture.Must(t, 0, env, dir, "diff", "--dir", dir, "--session", "2", "--json")
	var d struct {
		Session int `json:"session"`
		Files   []struct {
			Status, Path, From string
		} `json:"files"`
		Skipped []struct {
			Path, Why string
			Size      int64
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, out)
	}
	var got []string
	for _, f := range d.Files {
		got = append(got, f.Status+" "+f.From+">"+f.Path)
	}
	if want := "modified >bin.dat|modified >notes.txt|deleted >old.txt|renamed sub/a.txt>sub/b.txt"; strings.Join(got, "|") != want {
		t.Errorf("diff --session 2 --json files:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	if len(d.Skipped) != 1 || d.Skipped[0].Path != "big.bin" || d.Skipped[0].Size != 20000000 {
		t.Errorf("diff --session 2 skipped = %+v, want big.bin of 20000000 bytes", d.Skipped)
	}
	text := fixture.Must(t, 0, env, dir, "diff", "--dir", dir, "--session", "2")
	for _, want := range []string{"# session 2: the chamber after session 2", "compared with after session 1",
		"# not in the snapshot: big.bin (19.1 MiB, larger than snapshot_max_file)", "-v1\n+v2\n",
		"rename from sub/a.txt\nrename to sub/b.txt", "Binary files a/bin.dat and b/bin.dat differ", "deleted file mode 100644"} {
		if !strings.Contains(text, want) {
			t.Errorf("diff --session 2 lacks %q:\n%s", want, text)
		}
	}
	for _, not := range []string{"v3", "new.txt", "cryo.log", "timer.json", ".git/", "hook"} {
		if strings.Contains(text, not) {
			t.Errorf("diff --session 2 shows %q, which session 2 did not change:\n%s", not, text)
		}
	}
	stat := fixture.Must(t, 0, env, dir, "diff", "--dir", dir, "--session", "2", "--stat")
	if !strings.Contains(stat, "4 files changed") {
		t.Errorf("diff --stat:\n%s", stat)
	}
	// history: the FILES column and files_changed.
	var rows []struct {
		Session      int  `json:"session"`
		FilesChanged *int `json:"files_changed"`
	}
	if err := json.Unmarshal([]byte(fixture.Must(t, 0, env, dir, "history", "--dir", dir, "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	wantFiles := map[int]int{1: 4, 2: 4, 3: 2}
	for _, r := range rows {
		if r.FilesChanged == nil || *r.FilesChanged != wantFiles[r.Session] {
			t.Errorf("history session %d: files_changed = %v, want %d", r.Session, r.FilesChanged, wantFiles[r.Session])
		}
	}
	if h := fixture.Must(t, 0, env, dir, "history", "--dir", dir); !strings.Contains(h, "FILES") {
		t.Errorf("history has no FILES column:\n%s", h)
	}

	// rollback --to-session 1: every byte of session 1's files back; big.bin, which no
	// snapshot holds, left and listed.
	out = fixture.Must(t, 0, env, dir, "rollback", "--dir", dir, "--to-session", "1")
	if !strings.Contains(out, "left as it is: big.bin") || !strings.Contains(out, "undo with: cryochamber rollback --dir "+dir+" --to-session 3") {
		t.Errorf("rollback output:\n%s", out)
	}
	if h := chamberHash(t, dir, "big.bin"); h != hash1 {
		t.Fatalf("after rollback --to-session 1 the chamber's files differ from after session 1")
	}
	// And git's own tree hashes: the snapshot the rollback recorded holds session 1's tree.
	if trees := snapshotTrees(t, m, dir); trees["rollback to 1"] == "" || trees["rollback to 1"] != trees["session 1"] {
		t.Errorf("tree after the rollback %q, after session 1 %q", trees["rollback to 1"], trees["session 1"])
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "deeper")); err == nil {
		t.Errorf("sub/deeper (made by session 3) is still there")
	}
	fixture.Must(t, 0, env, dir, "wake", "--dir", dir, "--now")
	seen, _ := os.ReadFile(filepath.Join(outside, "seen-4.txt"))
	if string(seen) != "v1\na.txt\n" {
		t.Errorf("session 4 saw %q, want session 1's notes and sub/a.txt", seen)
	}
	prompt4, _ := os.ReadFile(filepath.Join(outside, "prompt-4.txt"))
	if !strings.Contains(string(prompt4), "the operator rolled the chamber back to after session 1") {
		t.Errorf("session 4's prompt does not tell of the rollback:\n%s", clipStr(string(prompt4), 2000))
	}
	if d := fixture.Must(t, 0, env, dir, "diff", "--dir", dir, "--session", "4"); !strings.Contains(d, "# no file changed") {
		t.Errorf("session 4 changed nothing in the chamber, but diff says:\n%s", d)
	}

	// A second rollback undoes the first.
	fixture.Must(t, 0, env, dir, "rollback", "--dir", dir, "--to-session", "3")
	if h := chamberHash(t, dir, "big.bin"); h != hash3 {
		t.Fatalf("rollback --to-session 3 did not undo the rollback: the files differ from after session 3")
	}
	if trees := snapshotTrees(t, m, dir); trees["rollback to 3"] != trees["session 3"] {
		t.Errorf("tree after the undo %q, after session 3 %q", trees["rollback to 3"], trees["session 3"])
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "v3\n" {
		t.Errorf("notes.txt = %q after the undo", b)
	}

	// A rollback while a session runs is refused, and changes nothing.
	fixture.WriteFile(t, filepath.Join(outside, "hold"), "")
	wake := fixture.Cmd{Env: env}.Start(t, "wake", "--dir", dir, "--now")
	fixture.WaitFor(t, 30*time.Second, "session 5 to start", func() bool { return fixture.Exists(filepath.Join(outside, "running")) })
	before := chamberHash(t, dir)
	code, out := bin(t, env, dir, "rollback", "--dir", dir, "--to-session", "1")
	if code != 1 || !strings.Contains(out, "rollback refused") {
		t.Errorf("rollback during a session: exit %d, want 1 and a refusal:\n%s", code, out)
	}
	if chamberHash(t, dir) != before {
		t.Errorf("the refused rollback changed the chamber")
	}
	fixture.WriteFile(t, filepath.Join(outside, "release"), "")
	if r := wake.Wait(t, 60*time.Second); r.Code != 0 {
		t.Errorf("session 5: exit %d\n%s", r.Code, r.Output)
	}

	// Bad inputs: each says what was wrong and what to do, and changes nothing.
	before = chamberHash(t, dir)
	for _, c := range []struct {
		args  []string
		code  int
		wants []string
	}{
		{[]string{"diff", "--dir", dir}, 2, []string{"cryochamber: --session N is required", "hint: `cryochamber history` lists the sessions"}},
		{[]string{"rollback", "--dir", dir, "--to-session", "0"}, 2, []string{"cryochamber: --to-session N is required"}},
		{[]string{"diff", "--dir", dir, "--session", "99"}, 1, []string{"cryochamber: there is no snapshot of the chamber after session 99", "hint: `cryochamber history --dir " + dir}},
		{[]string{"rollback", "--dir", dir, "--to-session", "99"}, 1, []string{"cryochamber: there is no snapshot of the chamber after session 99"}},
		{[]string{"rollback", "--dir", outside, "--to-session", "1"}, 2, []string{"is not a chamber"}},
	} {
		code, out := bin(t, env, dir, c.args...)
		if code != c.code {
			t.Errorf("`cryochamber %s`: exit %d, want %d\n%s", strings.Join(c.args, " "), code, c.code, out)
		}
		for _, w := range c.wants {
			if !strings.Contains(out, w) {
				t.Errorf("`cryochamber %s` lacks %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
	if chamberHash(t, dir) != before {
		t.Errorf("a refused command changed the chamber")
	}

	// None of the chamber's git hooks or its fsmonitor ran.
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("a hook of the chamber's own repository ran:\n%s", b)
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
	// Control: git itself, run in the chamber, does run them (so the check above can fail).
	c := exec.Command(git, "-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "control")
	c.Env = append(os.Environ(), "HOME="+outside)
	_ = c.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: the chamber's hooks do not run even under git itself: %v", err)
	}
}

// snapshotDiskScript puts the chamber's snapshot repository on a 1 MiB tmpfs (in a private
// mount namespace) after `start`, so that the snapshots of the next sessions hit a full disk.
const snapshotDiskScript = `
set -u
step() { name=$1; shift; "$@" > "$OUT/$name.out" 2>&1; echo $? > "$OUT/$name.code"; }
step start "$BIN" start "$SRC/plan.md"
snap=$(echo "$XDG_STATE_HOME"/cryochamber/chambers/*/snapshots)
[ -d "$snap" ] || exit 89
mount -t tmpfs -o size=1m tmpfs "$snap" || exit 90
step full1 "$BIN" wake --dir "$SRC" --now
cp "$XDG_STATE_HOME"/cryochamber/chambers/*/state.json "$OUT/full1.state.json"
step full2 "$BIN" wake --dir "$SRC" --now
step history "$BIN" history --dir "$SRC" --json
umount "$snap"
step ok "$BIN" wake --dir "$SRC" --now
step diff "$BIN" diff --dir "$SRC" --session 4 --json
`

// TestSnapshotDiskFull: a snapshot that hits a full disk is a warning and one notice (reason
// disk) to the operator; the session is armed as usual, and snapshots resume once there is room.
func TestSnapshotDiskFull(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	m := systemdtest.Start(t)
	hooks := startHooks(t)
	work := t.TempDir()
	agent := `#!/bin/sh
case "$CRYO_SESSION" in
2|3) head -c 3000000 /dev/urandom > "rand-$CRYO_SESSION.bin" ;;
4) rm -f rand-*.bin ;;
esac
echo "[CRYO:EXIT 0] ok"
echo "[CRYO:WAKE +1h]"
`
	toml := "agent = \"./agent.sh\"\nwatch_inbox = false\n\n[[fallback]]\naction = \"webhook\"\ntarget = \"" + hooks.url("/hook") + "\"\n"
	src := fixture.Chamber(t, toml, agent, nil)
	out := filepath.Join(work, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-m", "sh", "-c", snapshotDiskScript)
	cmd.Env = fixture.Env(m, "BIN="+fixture.Binary(), "SRC="+src, "OUT="+out, "XDG_STATE_HOME="+filepath.Join(work, "state"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the trial script failed: %v\n%s", err, b)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return string(b)
	}
	for _, step := range []string{"start", "full1", "full2", "ok"} {
		if code := strings.TrimSpace(read(step + ".code")); code != "0" {
			t.Errorf("%s exited %s, want 0:\n%s", step, code, read(step+".out"))
		}
	}
	if o := read("full1.out"); !strings.Contains(o, "warning: the snapshot of the chamber's files failed (the session goes on)") ||
		!strings.Contains(o, "no space left on device") || !strings.Contains(o, "hibernating: session 3") {
		t.Errorf("the wake whose snapshot hit a full disk:\n%s", o)
	}
	var st struct {
		Phase string `json:"phase"`
		Wake  string `json:"wake"`
	}
	if err := json.Unmarshal([]byte(read("full1.state.json")), &st); err != nil || st.Phase != "armed" || st.Wake == "" {
		t.Errorf("after a failed snapshot the chamber is %+v (%v), want armed with a wake", st, err)
	}
	if n := hooks.count("/hook", `"reason":"disk"`, "snapshot"); n != 1 {
		t.Errorf("%d disk notices about the snapshots, want exactly 1 (one per run of failures): %v", n, hooks.all())
	}
	if !strings.Contains(read("full2.out"), "snapshot of the chamber's files failed") {
		t.Errorf("the second failure did not warn:\n%s", read("full2.out"))
	}
	if h := read("history.out"); !strings.Contains(h, `"files_changed": null`) {
		t.Errorf("history of sessions without a snapshot:\n%s", h)
	}
	if o := read("ok.out"); strings.Contains(o, "snapshot") {
		t.Errorf("with room again, the snapshot still failed:\n%s", o)
	}
	if d := read("diff.out"); !strings.Contains(d, `"session": 4`) {
		t.Errorf("diff --session 4 after the disk was freed:\n%s", d)
	}
}

// TestSnapshotRecovered: a wake killed after its session ended, before the snapshot: the
// recovery takes it, so the session's changes are still in `diff` and `history`.
func TestSnapshotRecovered(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	m := systemdtest.Start(t)
	agent := `#!/bin/sh
printf 'session %s\n' "$CRYO_SESSION" > "work-$CRYO_SESSION.txt"
echo "[CRYO:EXIT 0] ok"
echo "[CRYO:WAKE +1h]"
`
	dir := fixture.Chamber(t, "agent = \"./agent.sh\"\nwatch_inbox = false\n", agent, nil)
	env := fixture.Env(m)
	fixture.Must(t, 0, env, dir, "start", filepath.Join(dir, "plan.md"))
	if code, out := bin(t, append(env, "CRYOCHAMBER_CRASH_AT=ended"), dir, "wake", "--dir", dir, "--now"); code != -9 {
		t.Fatalf("the wake killed at ended: exit %d, want -9 (SIGKILL)\n%s", code, out)
	}
	fixture.Must(t, 0, env, dir, "wake", "--dir", dir)
	var d struct {
		Files []struct{ Status, Path string } `json:"files"`
	}
	out := fixture.Must(t, 0, env, dir, "diff", "--dir", dir, "--session", "2", "--json")
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Files) != 1 || d.Files[0].Path != "work-2.txt" {
		t.Errorf("diff --session 2 after the recovery: %v\n%s", err, out)
	}
	var rows []struct {
		Session      int  `json:"session"`
		FilesChanged *int `json:"files_changed"`
	}
	if err := json.Unmarshal([]byte(fixture.Must(t, 0, env, dir, "history", "--dir", dir, "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].FilesChanged == nil || *rows[1].FilesChanged != 1 {
		t.Errorf("history after the recovery: %+v", rows)
	}
	// Killed after the snapshot (at "armed"): the recovery takes no second one, which would
	// make session 3 look like it changed nothing.
	if code, out := bin(t, append(env, "CRYOCHAMBER_CRASH_AT=armed"), dir, "wake", "--dir", dir, "--now"); code != -9 {
		t.Fatalf("the wake killed at armed: exit %d, want -9 (SIGKILL)\n%s", code, out)
	}
	fixture.Must(t, 0, env, dir, "wake", "--dir", dir)
	out = fixture.Must(t, 0, env, dir, "diff", "--dir", dir, "--session", "3", "--json")
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Files) != 1 || d.Files[0].Path != "work-3.txt" {
		t.Errorf("diff --session 3 after the recovery: %v\n%s", err, out)
	}
	fixture.Must(t, 0, env, dir, "cancel", "--dir", dir)
}
