package chamber

import (
	"slices"
	"strings"
	"testing"
)

// TestCleanPath: only absolute PATH entries are kept; the warning names each dropped one.
func TestCleanPath(t *testing.T) {
	c := cleanPath(".::bin:/usr/bin:./node_modules/.bin:/bin:")
	if c.kept != "/usr/bin:/bin" {
		t.Errorf("kept %q", c.kept)
	}
	if !slices.Equal(c.dropped, []string{".", "", "bin", "./node_modules/.bin", ""}) {
		t.Errorf("dropped %q", c.dropped)
	}
	if w := c.warning(); !strings.Contains(w, `PATH entries ".", "", "bin", "./node_modules/.bin", "" are not absolute`) {
		t.Errorf("warning %q", w)
	}
	if c := cleanPath(""); c.kept != "" || c.warning() != "" {
		t.Errorf("no PATH: %+v", c)
	}
	if c := cleanPath("/usr/bin:/bin"); c.kept != "/usr/bin:/bin" || c.warning() != "" {
		t.Errorf("an absolute PATH changed: %+v", c)
	}
}
