package chamber

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParseConfig: the strict loader never panics; every error is a ConfigError that names the
// file; whatever loads has its defaults filled in.
func FuzzParseConfig(f *testing.F) {
	f.Add(ConfigTemplate())
	f.Add([]byte("agent = \"claude\"\nsession_timeout = \"1h\"\n"))
	f.Add([]byte("[agents.x]\ncommand = [\"a\", \"{prompt}\"]\n[[fallback]]\naction = \"webhook\"\ntarget = \"http://x\"\n"))
	f.Add([]byte("min_free_disk = \"1GiB\"\nmax_retries = 0\n"))
	f.Add([]byte("= = ="))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("cryo.toml", data, time.UTC)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "cryo.toml") {
				t.Fatalf("error %T %v does not name the file", err, err)
			}
			return
		}
		if c.Agent == "" || c.Location == nil || c.MaxRetries == nil || c.WatchInbox == nil || c.SessionTimeout.D <= 0 || c.FallbackAfter.D <= 0 {
			t.Fatalf("defaults missing: %+v", c)
		}
		if _, err := c.AgentLine(c.Agent); err != nil {
			t.Fatalf("a loaded agent line does not resolve: %v", err)
		}
	})
}
