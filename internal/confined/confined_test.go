package confined

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// setup makes a chamber with a secret beside it and every kind of trap inside it.
func setup(t *testing.T) (*Dir, string) {
	t.Helper()
	base := t.TempDir()
	ch := filepath.Join(base, "chamber")
	must(t, os.MkdirAll(filepath.Join(ch, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(base, "secret"), []byte("SECRET"), 0o600))
	must(t, os.WriteFile(filepath.Join(ch, "plain"), []byte("plain"), 0o644))
	must(t, os.WriteFile(filepath.Join(ch, "sub", "in"), []byte("in"), 0o644))
	setupLinks(t, base)
	must(t, os.Symlink("..", filepath.Join(ch, "up")))
	must(t, os.Symlink("sub", filepath.Join(ch, "sub-link")))
	d, err := Open(ch)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return d, base
}

// setupLinks (re)plants the traps a write must replace, never follow.
func setupLinks(t *testing.T, base string) {
	t.Helper()
	ch := filepath.Join(base, "chamber")
	for _, n := range []string{"out-link", "abs-link", "in-link", "fifo"} {
		_ = os.Remove(filepath.Join(ch, n))
	}
	must(t, os.Symlink("../secret", filepath.Join(ch, "out-link")))
	must(t, os.Symlink(filepath.Join(base, "secret"), filepath.Join(ch, "abs-link")))
	must(t, os.Symlink("sub/in", filepath.Join(ch, "in-link")))
	must(t, syscall.Mkfifo(filepath.Join(ch, "fifo"), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// done fails the test if fn does not return within a few seconds: a FIFO must never block.
func done(t *testing.T, what string, fn func()) {
	t.Helper()
	ch := make(chan struct{})
	go func() { fn(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

func TestOpenRefusesWhatIsNotARegularFileInside(t *testing.T) {
	d, _ := setup(t)
	for _, tc := range []struct {
		name string
		want string // "" = opens
	}{
		{"plain", ""},
		{"sub/in", ""},
		{"sub-link/in", ""}, // a directory symlink that stays inside is harmless
		{"out-link", "a symlink"},
		{"abs-link", "a symlink"},
		{"in-link", "a symlink"},
		{"up/secret", "escapes"},
		{"../secret", "escapes"},
		{"/etc/passwd", "escapes"},
		{"fifo", "a FIFO"},
		{"sub", "a directory"},
		{"missing", "no such file"},
	} {
		var f *os.File
		var err error
		done(t, "open "+tc.name, func() { f, err = d.Open(tc.name) })
		if f != nil {
			f.Close()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Open(%q): %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) && !strings.Contains(err.Error(), "path escapes")):
			t.Errorf("Open(%q) = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestNotRegularErrorSaysWhatAndWhatToDo(t *testing.T) {
	d, _ := setup(t)
	_, err := d.Open("fifo")
	var nr *NotRegularError
	if !errors.As(err, &nr) || !errors.Is(err, ErrNotRegular) {
		t.Fatalf("Open(fifo) = %v, want a NotRegularError", err)
	}
	if got, want := err.Error(), "fifo is a FIFO, not a regular file: refused (remove it)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestWriteReplacesASymlinkInsteadOfFollowingIt(t *testing.T) {
	d, base := setup(t)
	for _, name := range []string{"out-link", "abs-link", "in-link", "fifo"} {
		done(t, "write "+name, func() { must(t, d.WriteFile(name, []byte("new"), 0o600, nil)) })
		fi, err := d.Lstat(name)
		must(t, err)
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s after WriteFile: %v, want a regular 0600 file", name, fi.Mode())
		}
	}
	// WriteView (no fsync) replaces a symlink the same way.
	setupLinks(t, base)
	for _, name := range []string{"out-link", "abs-link", "in-link", "fifo"} {
		done(t, "view "+name, func() { must(t, d.WriteView(name, []byte("view"), 0o600)) })
		fi, err := d.Lstat(name)
		must(t, err)
		if b, _ := d.ReadFile(name, 10); !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || string(b) != "view" {
			t.Errorf("%s after WriteView: %v %q, want a regular 0600 file", name, fi.Mode(), b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(base, "secret")); string(b) != "SECRET" {
		t.Errorf("the file outside was changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "chamber", "sub", "in")); string(b) != "in" {
		t.Errorf("the symlink's target inside was changed: %q", b)
	}
}

func TestAppendThroughASymlinkIsRefused(t *testing.T) {
	d, base := setup(t)
	for _, name := range []string{"out-link", "in-link", "fifo"} {
		var err error
		done(t, "append "+name, func() { _, err = d.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600) })
		if !errors.Is(err, ErrNotRegular) && (err == nil || !strings.Contains(err.Error(), "escapes")) {
			t.Errorf("append to %s: %v, want refused", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(base, "secret")); string(b) != "SECRET" {
		t.Errorf("the file outside was changed: %q", b)
	}
	f, err := d.OpenFile("new.log", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	must(t, err)
	f.Close()
}

func TestReadFileBounds(t *testing.T) {
	d, _ := setup(t)
	if _, err := d.ReadFile("plain", 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over the limit: %v", err)
	}
	b, err := d.ReadFile("plain", 5)
	if err != nil || string(b) != "plain" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
}

func TestCreateNewNeverReplaces(t *testing.T) {
	d, _ := setup(t)
	must(t, d.CreateNew("sub/new", []byte("1"), 0o600))
	if err := d.CreateNew("sub/new", []byte("2"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second CreateNew: %v, want ErrExist", err)
	}
	if err := d.CreateNew("out-link", []byte("2"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateNew over a symlink: %v, want ErrExist", err)
	}
	b, _ := d.ReadFile("sub/new", 10)
	if string(b) != "1" {
		t.Errorf("content %q", b)
	}
	ents, _ := d.ReadDir("sub")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestReadDirAndMkdirAllRefuseSymlinkedDirectories(t *testing.T) {
	d, _ := setup(t)
	if _, err := d.ReadDir("sub-link"); err == nil {
		t.Error("ReadDir through a symlink: no error")
	}
	if _, err := d.ReadDir("up"); err == nil {
		t.Error("ReadDir of a symlink leading out: no error")
	}
	if err := d.MkdirAll("up/x", 0o700); err == nil {
		t.Error("MkdirAll through a symlink leading out: no error")
	}
	if err := d.MkdirAll("plain/x", 0o700); err == nil {
		t.Error("MkdirAll through a file: no error")
	}
	must(t, d.MkdirAll("a/b/c", 0o700))
	must(t, os.Chmod(filepath.Join(d.Path(), "a/b/c"), 0o755))
	must(t, d.MkdirAll("a/b/c", 0o700))
	fi, err := d.Lstat("a/b/c")
	must(t, err)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("MkdirAll left mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestOpenInConfinesTheFinalName(t *testing.T) {
	_, base := setup(t)
	if _, err := OpenIn(filepath.Join(base, "chamber", "out-link"), os.O_RDONLY, 0); err == nil {
		t.Error("OpenIn followed a symlink")
	}
	f, err := OpenIn(filepath.Join(base, "chamber", "plain"), os.O_RDONLY, 0)
	must(t, err)
	f.Close()
}

func TestRemoveStale(t *testing.T) {
	d, _ := setup(t)
	must(t, os.WriteFile(filepath.Join(d.Path(), ".state.json.tmp-abc"), nil, 0o600))
	must(t, os.WriteFile(filepath.Join(d.Path(), ".other.tmp-abc"), nil, 0o600))
	d.RemoveStale("state.json")
	if _, err := d.Lstat(".state.json.tmp-abc"); !errors.Is(err, fs.ErrNotExist) {
		t.Error("stale temp file kept")
	}
	if _, err := d.Lstat(".other.tmp-abc"); err != nil {
		t.Error("another file's temp removed")
	}
}
