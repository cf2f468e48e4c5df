package binary

import (
	"flag"
	"testing"

	"github.com/cryochamber/cryochamber/internal/e2e/fixture"
)

// update rewrites the golden file docs/BAD-INPUTS.md (TestBadInputCatalogue) instead of
// comparing with it.
var update = flag.Bool("update", false, "rewrite golden files instead of comparing with them")

// TestMain builds the cryochamber binary once: the tests run it, and the timers they arm run it.
func TestMain(m *testing.M) { fixture.Main(m) }
