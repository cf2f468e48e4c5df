package chamber

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/cryochamber/cryochamber/internal/termtext"
)

// What `reload` shows before it accepts: every key of cryo.toml whose value in force would
// change, old → new, and every program whose pin would change. The agent can write cryo.toml
// and the programs in its chamber; an operator who runs `reload` after an upgrade must see an
// injected [[fallback]] webhook, a new agent line or an `allowed_commands` entry before it is
// in force, not a bare key name. Values come from the chamber (the agent wrote them): they are
// made safe for a terminal, and secrets are never shown.

// configChange is one key whose value differs between two configurations.
type configChange struct {
	Key      string // as in cryo.toml: "session_timeout", "fallback[2].target", "agents.x.env.TOKEN"
	Old, New string // rendered for the terminal; "(unset)" when absent, "(hidden)" for a secret
}

// unset is how a key that is absent on one side is shown.
const unset = "(unset)"

// String is the change as one line.
func (c configChange) String() string {
	// The key too is the agent's text ([agents.NAME], an env name), validated by ParseConfig;
	// made one printable line all the same, as every value is.
	return fmt.Sprintf("%s: %s → %s", termtext.OneLine(c.Key, 200), c.Old, c.New)
}

// needsYes reports whether accepting this change needs `reload --yes`. Only the time zone the
// plan's times are read in changes nothing an attacker could use. Everything else bounds the
// agent (limits, watch_inbox, what it may run, with which arguments and environment) or
// decides who is told and how (alert targets, channels, the backend): an edit the agent could
// have made.
func (c configChange) needsYes() bool {
	return topKey(c.Key) != "timezone"
}

// topKey is the first segment of a key path: "fallback[2].target" → "fallback".
func topKey(k string) string {
	if i := strings.IndexAny(k, ".["); i >= 0 {
		return k[:i]
	}
	return k
}

// configChanges lists every key whose value differs between a and b, sorted by key. Defaults
// are filled in on both sides, so removing a key shows the default it falls back to.
func configChanges(a, b *Config) []configChange {
	fa, fb := flattenConfig(a), flattenConfig(b)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []configChange
	for k := range keys {
		va, oka := fa[k]
		vb, okb := fb[k]
		if oka && okb && va == vb {
			continue
		}
		c := configChange{Key: k, Old: unset, New: unset}
		if oka {
			c.Old = renderValue(k, va)
		}
		if okb {
			c.New = renderValue(k, vb)
		}
		if c.Old == c.New { // two secrets, both hidden
			c.Old, c.New = "(hidden)", "(hidden, changed)"
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// flattenConfig maps every key path of c that has a value to that value, written as in TOML.
func flattenConfig(c *Config) map[string]string {
	out := map[string]string{}
	if c != nil {
		flatten(out, "", reflect.ValueOf(*c))
	}
	return out
}

func flatten(out map[string]string, prefix string, v reflect.Value) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch v.Type() {
	case reflect.TypeOf(Duration{}):
		out[prefix] = strconv.Quote(fmtDur(v.Interface().(Duration).D))
		return
	case reflect.TypeOf(Size{}):
		out[prefix] = strconv.FormatInt(v.Interface().(Size).N, 10)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			flatten(out, prefix, v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			flatten(out, join(name), v.Field(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			flatten(out, join(k.String()), v.MapIndex(k))
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return
		}
		if v.Type().Elem().Kind() == reflect.Struct {
			// [[fallback]]: one key per entry and field, numbered from 1 as an operator counts.
			for i := 0; i < v.Len(); i++ {
				flatten(out, fmt.Sprintf("%s[%d]", prefix, i+1), v.Index(i))
			}
			return
		}
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = scalar(v.Index(i))
		}
		out[prefix] = "[" + strings.Join(parts, ", ") + "]"
	default:
		if s := scalar(v); s != `""` {
			out[prefix] = s
		}
	}
}

func scalar(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64, reflect.Int32:
		return strconv.FormatInt(v.Int(), 10)
	}
	return fmt.Sprint(v.Interface())
}

// renderValue makes a value fit to show: a secret is hidden, a URL loses its user info and
// query (where tokens hide), and the rest is one line of printable text, clipped.
func renderValue(key, v string) string {
	if secretKey(key) {
		return "(hidden)"
	}
	if s, err := strconv.Unquote(v); err == nil && strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			if u.User != nil {
				u.User = url.User("hidden")
			}
			if u.RawQuery != "" {
				u.RawQuery = "hidden"
			}
			v = strconv.Quote(u.String())
		}
	}
	return termtext.OneLine(v, 200)
}

// secretKey reports whether a key's value may be a secret: the environment an [agents.NAME]
// table gives its agent (an API key, often), and any key named for a password, token, secret
// or key, except those that hold only the name of a variable or a command (password_env,
// token_command), which are shown: an injected password_command is code that would run.
func secretKey(key string) bool {
	if strings.HasPrefix(key, "agents.") && strings.Contains(key, ".env.") {
		return true
	}
	segs := strings.Split(key, ".")
	last := strings.ToLower(segs[len(segs)-1])
	if strings.HasSuffix(last, "_env") || strings.HasSuffix(last, "_command") {
		return false
	}
	for _, w := range []string{"password", "secret", "token", "key"} {
		if strings.Contains(last, w) {
			return true
		}
	}
	return false
}

// programChange is a program inside the chamber whose pin `reload` would change.
type programChange struct {
	Path     string
	Old, New string // sha256, "" when not pinned on that side
}

func (c programChange) String() string {
	short := func(h string) string {
		if len(h) > 12 {
			return h[:12]
		}
		return h
	}
	p := termtext.Line(c.Path)
	switch {
	case c.Old == "":
		return fmt.Sprintf("%s: newly pinned (sha256 %s)", p, short(c.New))
	case c.New == "":
		return fmt.Sprintf("%s: no longer pinned", p)
	}
	return fmt.Sprintf("%s: content changed (sha256 %s → %s)", p, short(c.Old), short(c.New))
}

// programChanges compares two pins' programs.
func programChanges(old, new map[string]string) []programChange {
	var out []programChange
	for p, h := range new {
		if old[p] != h {
			out = append(out, programChange{Path: p, Old: old[p], New: h})
		}
	}
	for p, h := range old {
		if _, ok := new[p]; !ok {
			out = append(out, programChange{Path: p, Old: h})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
