// Package program is the one rule for "can this program run, and where is it": the lookup that
// validation (step 3), the session that runs an agent, `start`'s agent check and an email
// password command all use, so that what validation approves at noon is what runs at 3 a.m.
//
// A program is resolved the way execvp would with a given PATH (the chamber's captured PATH,
// never this process's): a name with a slash is a path (relative to the chamber), a bare name is
// searched in the PATH's absolute entries only (a relative entry would depend on the directory
// we happen to run in). It never runs anything.
package program

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// NotFoundError is a bare program name that is on no entry of the PATH.
type NotFoundError struct {
	Program string
	Path    string // the PATH that was searched
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%q not found on the PATH the chamber runs with (%s)", e.Program, e.Path)
}

// Unwrap lets errors.Is(err, fs.ErrNotExist) hold.
func (e *NotFoundError) Unwrap() error { return fs.ErrNotExist }

// Look resolves name to the absolute path of an executable file. dir is the directory a
// relative name is resolved against (the chamber), pathList the PATH to search.
func Look(name, dir, pathList string) (string, error) {
	if name == "" {
		return "", errors.New("empty program name")
	}
	if filepath.Base(name) != name || name == "." || name == ".." {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := Executable(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("%q does not exist", p)
			}
			return "", fmt.Errorf("%q: %w", p, err)
		}
		return p, nil
	}
	var unusable error
	for _, d := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		err := Executable(p)
		if err == nil {
			return p, nil
		}
		if unusable == nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			unusable = fmt.Errorf("%q found as %s, but %w", name, p, err)
		}
	}
	if unusable != nil {
		return "", unusable
	}
	return "", &NotFoundError{Program: name, Path: pathList}
}

// Executable says why the file at p cannot be run, or nil.
func Executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("it is a directory")
	}
	if !fi.Mode().IsRegular() {
		return errors.New("it is not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("it is not executable (chmod +x %s)", p)
	}
	return nil
}

// PathOf returns the value of PATH in env ("K=V" pairs; the last one wins).
func PathOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > 5 && env[i][:5] == "PATH=" {
			return env[i][5:]
		}
	}
	return ""
}
