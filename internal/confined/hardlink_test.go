package confined

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A hard link in the chamber may be the other name of a file outside it (~/.bashrc, a private
// key): appending to it or reading it would reach outside as surely as a symlink. Every open
// refuses it; WriteFile replaces it (the file outside keeps its content); a file with one name
// opens as before.
func TestHardLinksAreRefused(t *testing.T) {
	d, base := setup(t)
	must(t, os.Link(filepath.Join(base, "secret"), filepath.Join(base, "chamber", "linked")))
	for _, tc := range []struct {
		what string
		open func() error
	}{
		{"read", func() error { _, err := d.ReadFile("linked", 100); return err }},
		{"append", func() error {
			f, err := d.OpenFile("linked", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err == nil {
				f.Close()
			}
			return err
		}},
	} {
		err := tc.open()
		var nr *NotRegularError
		if !errors.As(err, &nr) || !errors.Is(err, ErrNotRegular) || nr.Links != 2 {
			t.Fatalf("%s of a hard link: %v, want a NotRegularError with 2 links", tc.what, err)
		}
		if want := "linked is a hard link (one file with 2 names, maybe outside the chamber): refused (remove it)"; err.Error() != want {
			t.Errorf("%s: message %q, want %q", tc.what, err.Error(), want)
		}
	}
	must(t, d.WriteFile("linked", []byte("new"), 0o600, nil))
	if b, _ := os.ReadFile(filepath.Join(base, "secret")); string(b) != "SECRET" {
		t.Errorf("the file outside was changed: %q", b)
	}
	if b, err := d.ReadFile("linked", 100); err != nil || string(b) != "new" {
		t.Errorf("after WriteFile the name is a file of its own: %q %v", b, err)
	}
	// CreateNew links a temporary file to its name and removes the temporary name: what it
	// publishes has one name, and opens.
	must(t, d.CreateNew("published", []byte("x"), 0o600))
	if _, err := d.ReadFile("published", 10); err != nil {
		t.Errorf("a file CreateNew published: %v", err)
	}
	if fi, err := d.Lstat("published"); err != nil || Links(fi) != 1 {
		t.Errorf("published has %d names (%v)", Links(fi), err)
	}
	if ents, _ := d.ReadDir("."); strings.Contains(names(ents), ".tmp-") {
		t.Errorf("a temporary name is left: %s", names(ents))
	}
}

func names(ents []os.DirEntry) string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return strings.Join(out, " ")
}
