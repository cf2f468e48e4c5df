package confined

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
)

// ReadDir reports what os.ReadDir reports (names and types, every kind of entry, a directory
// longer than one getdents buffer), and Info describes the entry itself (a symlink, not its
// target).
func TestReadDirTypes(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3000; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d-a-rather-long-message-name-to-fill-buffers.md", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "2026-11"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := net.Listen("unix", filepath.Join(dir, "sock")); err == nil {
		defer l.Close()
	}
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.ReadDir("d")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Name() < got[j].Name() })
	if len(got) != len(want) {
		t.Fatalf("ReadDir listed %d entries, os.ReadDir %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name() != want[i].Name() || got[i].Type() != want[i].Type() || got[i].IsDir() != want[i].IsDir() {
			t.Fatalf("entry %d: %q %v, want %q %v", i, got[i].Name(), got[i].Type(), want[i].Name(), want[i].Type())
		}
	}
	for _, e := range got {
		if e.Name() != "link.md" {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("Info of a symlink = %v, %v; want the link itself", fi, err)
		}
	}
	if _, err := d.ReadDir("d/link.md"); err == nil {
		t.Error("ReadDir of a symlink succeeded")
	}
}
