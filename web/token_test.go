package web_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cryochamber/cryochamber/web"
)

func TestLoadTokenCreatesAndKeeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "web", "token")
	tok, err := web.LoadToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok) {
		t.Fatalf("token %q is not 64 hex digits", tok)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Fatalf("token directory mode %v", di.Mode().Perm())
	}
	again, err := web.LoadToken(path)
	if err != nil || again != tok {
		t.Fatalf("second load: %q %v, want %q", again, err, tok)
	}
	other, _ := web.LoadToken(filepath.Join(t.TempDir(), "token"))
	if other == tok {
		t.Fatal("two token files hold the same token")
	}
}

func TestLoadTokenConcurrentStartsAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	toks := make([]string, 8)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := web.LoadToken(path)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		}()
	}
	wg.Wait()
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatalf("servers starting at once got different tokens: %q", toks)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

// Every token file that someone else could have written or read is refused, left as it is,
// and the error says what to do.
func TestLoadTokenRefuses(t *testing.T) {
	good := strings.Repeat("ab", 32) + "\n"
	cases := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"a symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			writeFile(t, target, good, 0o600)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symlink"},
		{"readable by others", func(t *testing.T, path string) { writeFile(t, path, good, 0o644) }, "others can read or write it"},
		{"writable by the group", func(t *testing.T, path string) {
			writeFile(t, path, good, 0o600)
			if err := os.Chmod(path, 0o620); err != nil {
				t.Fatal(err)
			}
		}, "others can read or write it"},
		{"a FIFO (must not block)", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"a directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"another user's", func(t *testing.T, path string) {
			writeFile(t, path, good, 0o600)
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the file to another user")
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "belongs to another user"},
		{"not hex", func(t *testing.T, path string) { writeFile(t, path, strings.Repeat("zz", 32)+"\n", 0o600) }, "does not hold a token"},
		{"too short", func(t *testing.T, path string) { writeFile(t, path, "abcd\n", 0o600) }, "does not hold a token"},
		{"too long", func(t *testing.T, path string) { writeFile(t, path, good+good, 0o600) }, "does not hold a token"},
		{"empty", func(t *testing.T, path string) { writeFile(t, path, "", 0o600) }, "does not hold a token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "token")
			c.setup(t, path)
			before, _ := os.Lstat(path)
			tok, err := web.LoadToken(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "remove it") {
				t.Fatalf("LoadToken = %q, %v; want an error saying %q and what to do", tok, err, c.want)
			}
			after, _ := os.Lstat(path)
			if before.Mode() != after.Mode() || before.Size() != after.Size() {
				t.Fatalf("the refused file was changed: %v %d → %v %d", before.Mode(), before.Size(), after.Mode(), after.Size())
			}
		})
	}
	if _, err := web.LoadToken("relative/token"); err == nil {
		t.Fatal("a relative path was accepted")
	}
}
