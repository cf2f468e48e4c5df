package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cryochamber/cryochamber/internal/atomicfile"
)

// The address `web --install` gave the user manager, kept beside the token so that `web --url`
// prints the installed dashboard's address rather than the default one.

func webListenFile(stateDir string) string { return filepath.Join(stateDir, "web", "listen") }

// installedWebListen is the address of the installed dashboard, "" if none was recorded.
func installedWebListen(stateDir string) string {
	b, err := os.ReadFile(webListenFile(stateDir))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func recordWebListen(stateDir, addr string) error {
	return atomicfile.Write(webListenFile(stateDir), []byte(addr+"\n"), 0o600)
}

func forgetWebListen(stateDir string) error {
	if err := os.Remove(webListenFile(stateDir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
