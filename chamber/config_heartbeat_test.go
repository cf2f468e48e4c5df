package chamber

import (
	"strings"
	"testing"
	"time"
)

func TestHeartbeatConfigErrors(t *testing.T) {
	const uuid = "5bd2a5d5-2f5d-4bd3-8d4e-8a2a7ed1c9c4"
	cases := []struct{ toml, want string }{
		{"[heartbeat]\n", "heartbeat.url: is required"},
		{"[heartbeat]\nurl = \"hc-ping.com/x\"\n", `heartbeat.url: "hc-ping.com/x" is not an http(s) URL`},
		{"[heartbeat]\nurl = \"https://u:secret@hc-ping.com/x\"\n", "credentials never go in cryo.toml"},
		{"[heartbeat]\nurl = \"https://hc-ping.com/x\"\napi_url = \"https://healthchecks.io\"\ncheck = \"" + uuid + "\"\n", "heartbeat.api_key_env: is required"},
		{"[heartbeat]\nurl = \"https://hc-ping.com/x\"\napi_url = \"https://healthchecks.io\"\napi_key_env = \"HC\"\n", "heartbeat.check: is required"},
		{"[heartbeat]\nurl = \"https://hc-ping.com/x\"\napi_url = \"https://healthchecks.io\"\napi_key_env = \"HC\"\ncheck = \"abc\"\n", `"abc" is not a uuid`},
		{"[heartbeat]\nurl = \"https://hc-ping.com/x\"\ngrace = \"30s\"\n", "heartbeat.grace: must be between 1m and a year"},
		{"summaries = \"mail\"\n", `summaries: unknown value "mail"`},
		{"digest = \"hourly\"\n", `digest: "hourly" is not a digest schedule`},
		{"digest = \"weekly funday 09:00\"\n", `"funday" is not a day`},
		{"digest = \"daily 9:5\"\n", `"9:5" is not a time of day`},
		{"digest = \"daily 24:00\"\n", `"24:00" is not a time of day`},
	}
	for _, c := range cases {
		_, err := ParseConfig("cryo.toml", []byte(c.toml), time.UTC)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v; want %q", c.toml, err, c.want)
		}
	}
	cfg, err := ParseConfig("cryo.toml", []byte("fallback_after = \"2h\"\n[heartbeat]\nurl = \"https://hc-ping.com/x\"\napi_url = \"https://healthchecks.io\"\napi_key_env = \"HC_KEY\"\ncheck = \""+uuid+"\"\n"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Heartbeat.Grace.D != 2*time.Hour || cfg.Summaries != SummariesOutbox {
		t.Fatalf("defaults: grace %v, summaries %q", cfg.Heartbeat.Grace.D, cfg.Summaries)
	}
	// The API key is a secret: captured at start, never given to the agent.
	found := false
	for _, n := range cfg.secretNames() {
		found = found || n == "HC_KEY"
	}
	if !found {
		t.Fatalf("secretNames %v lacks the heartbeat API key", cfg.secretNames())
	}
}

func TestDigestSchedule(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	d, err := ParseDigest("weekly Mon 09:00")
	if err != nil {
		t.Fatal(err)
	}
	// Friday 2026-11-27 10:00 UTC: the next Monday 09:00 in Berlin is 08:00 UTC on the 30th.
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	if got, want := d.Next(now, berlin), time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next = %v, want %v", got, want)
	}
	if got, want := d.Prev(now, berlin), time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Prev = %v, want %v", got, want)
	}
	daily, _ := ParseDigest("daily 09:00")
	if got, want := daily.Next(time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC), berlin), time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("daily Next = %v, want %v", got, want)
	}
	if got := daily.OnCalendar(berlin); got != "*-*-* 09:00:00 Europe/Berlin" {
		t.Fatalf("OnCalendar = %q", got)
	}
	if got := daily.OnCalendar(time.Local); got != "*-*-* 09:00:00" {
		t.Fatalf("OnCalendar in the machine's zone = %q", got)
	}
	if got := d.OnCalendar(berlin); got != "Mon *-*-* 09:00:00 Europe/Berlin" {
		t.Fatalf("OnCalendar = %q", got)
	}
}

func TestMaxPerDayConfig(t *testing.T) {
	const base = "[channels]\nmax_per_day = %s\n[channels.zulip]\nsite = \"https://chat.example.com\"\nemail = \"bot@example.com\"\ntoken_env = \"Z\"\nstream = \"ops\"\nallowed_users = [\"a@example.com\"]\n"
	if _, err := ParseConfig("cryo.toml", []byte(strings.Replace(base, "%s", "-1", 1)), time.UTC); err == nil || !strings.Contains(err.Error(), "channels.max_per_day: must be between 1 and 10000, not -1") {
		t.Fatalf("max_per_day = -1: %v", err)
	}
	cfg, err := ParseConfig("cryo.toml", []byte(strings.Replace(base, "max_per_day = %s\n", "", 1)), time.UTC)
	if err != nil || cfg.Channels.MaxPerDay != DefaultMaxPerDay {
		t.Fatalf("default max_per_day: %+v, %v", cfg, err)
	}
}
