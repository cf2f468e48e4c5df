package timer

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

var idPattern = regexp.MustCompile(`^cryo-[a-z0-9]+(-[a-z0-9]+)*-[0-9a-f]{8}$`)

func TestID(t *testing.T) {
	tests := []struct {
		dir  string
		want string
	}{
		// Literal values (hashes from sha256sum): a change here renames every installed unit
		// of every user, so it must be deliberate.
		{"/home/alice/plans/garden", "cryo-garden-ee66b621"},
		{"/home/alice/plans/garden/", "cryo-garden-ee66b621"},
		{"/home/alice/plans/./garden", "cryo-garden-ee66b621"},
		{"/home/alice/My Project (2026)", "cryo-my-project-2026-bf473e6f"},
		{"/srv/--Weird__Name--", "cryo-weird-name-86937ad3"},
		{"/srv/été ✓ 日本", "cryo-t-d4bebf9d"},
		{"/srv/✓✓✓", "cryo-chamber-aa6d1db0"},
		{"/", "cryo-chamber-8a5edab2"},
	}
	for _, tt := range tests {
		got := ID(tt.dir)
		if got != tt.want {
			t.Errorf("ID(%q) = %q, want %q", tt.dir, got, tt.want)
		}
		if !idPattern.MatchString(got) {
			t.Errorf("ID(%q) = %q is not a valid unit name stem", tt.dir, got)
		}
		if err := checkID(got); err != nil {
			t.Errorf("checkID(ID(%q)): %v", tt.dir, err)
		}
	}
}

func TestIDSameBaseNameDiffers(t *testing.T) {
	a, b := ID("/home/alice/garden"), ID("/home/bob/garden")
	if a == b {
		t.Fatalf("two chambers named garden got the same ID %q", a)
	}
}

func TestSlugAtMost32Bytes(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{strings.Repeat("a", 40), strings.Repeat("a", 32)},
		{strings.Repeat("a", 32), strings.Repeat("a", 32)},
		{strings.Repeat("a", 31) + "-b", strings.Repeat("a", 31)}, // a dash and a letter would make 33
		{strings.Repeat("a", 30) + "-b", strings.Repeat("a", 30) + "-b"},
		{strings.Repeat("a", 30) + "--bc", strings.Repeat("a", 30) + "-b"},
		{strings.Repeat("ab ", 20), strings.TrimSuffix(strings.Repeat("ab-", 11), "-")},
		{"---", "chamber"},
		{"", "chamber"},
	}
	for _, tt := range tests {
		got := slug(tt.name)
		if got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if len(got) > 32 || strings.HasSuffix(got, "-") || strings.HasPrefix(got, "-") {
			t.Errorf("slug(%q) = %q (%d bytes) breaks the slug rules", tt.name, got, len(got))
		}
	}
}

func FuzzID(f *testing.F) {
	for _, s := range []string{"/home/a/garden", "/", "/x/" + strings.Repeat("ab-", 20), "/é/✓"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dir string) {
		if !strings.HasPrefix(dir, "/") {
			return
		}
		id := ID(dir)
		if !idPattern.MatchString(id) || len(id) > len("cryo-")+32+1+8 {
			t.Fatalf("ID(%q) = %q", dir, id)
		}
		if id != ID(dir) {
			t.Fatalf("ID(%q) is not stable", dir)
		}
	})
}

// nextOnly is a backend that can say nothing but Next (as systemd), for the fallbacks of Read,
// FireAt and Check.
type nextOnly struct {
	Backend
	next time.Time
	ok   bool
}

func (b nextOnly) Name() string { return "systemd" }
func (b nextOnly) Next(context.Context, string, Kind) (time.Time, bool, error) {
	return b.next, b.ok, nil
}

func TestCheckThroughNext(t *testing.T) {
	ctx := context.Background()
	want := time.Date(2026, 3, 8, 9, 0, 0, 250e6, time.UTC)
	fire, err := FireAt(nextOnly{}, want, want.Add(-time.Hour))
	if err != nil || !fire.Equal(want.Truncate(time.Second).Add(time.Second)) {
		t.Fatalf("FireAt = %s, %v", fire, err)
	}
	v, err := Check(ctx, nextOnly{next: fire.Add(123 * time.Microsecond), ok: true}, "cryo-x-00000000", Wake, fire)
	if err != nil || !v.OK || v.String() != "systemd holds 2026-03-08T09:00:01Z → next 2026-03-08T09:00:01Z" {
		t.Errorf("Check = %q %v %v", v, v.OK, err)
	}
	v, _ = Check(ctx, nextOnly{next: fire.Add(time.Second), ok: true}, "cryo-x-00000000", Wake, fire)
	if v.OK || !strings.HasSuffix(v.String(), ", want 2026-03-08T09:00:01Z") {
		t.Errorf("a second off: %q %v", v, v.OK)
	}
	v, _ = Check(ctx, nextOnly{}, "cryo-x-00000000", Wake, fire)
	if v.OK || v.Found || v.String() != "systemd has no such timer" {
		t.Errorf("no timer: %q", v)
	}
	if _, err := FireAt(nextOnly{}, time.Time{}, fire); err == nil {
		t.Error("FireAt of no time")
	}
	if err := Preflight(ctx, nextOnly{}); err != nil || Advice(nextOnly{}) != nil {
		t.Errorf("Preflight, Advice of a plain backend: %v, %q", err, Advice(nextOnly{}))
	}
}
