package web

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// tokenBytes is the token's strength: 256 random bits, written as 64 hex digits.
const tokenBytes = 32

// LoadToken returns the dashboard's token kept at path, creating it if there is none: 64 hex
// digits in a file of mode 0600, in a directory of mode 0700 (the user's state directory, out
// of every chamber). The token outlives the server, so the URL the operator bookmarked keeps
// working when the user manager starts the server again. A token file that is a symlink, not
// a regular file, readable by others or malformed is refused, never used or replaced.
func LoadToken(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("token file %q is not an absolute path", path)
	}
	tok, err := readToken(path)
	if !errors.Is(err, os.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create the token's directory: %w", err)
	}
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok = hex.EncodeToString(raw)
	// Published with link(2): two servers starting at once agree on the first token written.
	f, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return "", fmt.Errorf("create the token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the token: %w", err)
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("write the token: %w", err)
	}
	_ = atomicfile.SyncDir(filepath.Dir(path))
	return readToken(path)
}

// readToken reads an existing token file, refusing one that anyone else could have read or
// written: the token is the key to every chamber of this user.
func readToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return "", fmt.Errorf("token file %s is a symlink: remove it (a new token is made)", path)
		}
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file: remove it (a new token is made)", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("token file %s belongs to another user: remove it (a new token is made)", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %v, so others can read or write it: remove it (a new token is made)", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, 2*tokenBytes+2))
	if err != nil {
		return "", err
	}
	tok := string(data)
	if len(tok) == 2*tokenBytes+1 && tok[len(tok)-1] == '\n' {
		tok = tok[:len(tok)-1]
	}
	if b, err := hex.DecodeString(tok); err != nil || len(b) != tokenBytes {
		return "", fmt.Errorf("token file %s does not hold a token: remove it (a new token is made)", path)
	}
	return tok, nil
}
