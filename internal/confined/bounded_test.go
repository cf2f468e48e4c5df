package confined

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadPathBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadPath(p, 5); err != nil || string(data) != "12345" {
		t.Errorf("ReadPath at the limit = %q, %v", data, err)
	}
	_, err := ReadPath(p, 4)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "more than 4 bytes") {
		t.Errorf("ReadPath over the limit: %v", err)
	}
	if _, err := ReadPath(filepath.Join(t.TempDir(), "none"), 4); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadPath of a missing file: %v", err)
	}
}
