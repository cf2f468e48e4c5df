package chamber

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/confined"
)

// The agent CLIs load configuration from their working directory, and some of it is code:
// Claude Code's hooks and MCP servers, opencode's plugins and custom tools, Codex's project
// config (MCP servers, notify). Whatever cage a session runs in, the operator's own CLI, run by
// hand in the chamber, would load what the agent left there and run it as the operator, outside
// any sandbox; so would a CMD that moves the chamber to another CLI. cryochamber does not
// judge that code: it keeps a fingerprint of it (paths and content hashes) in the private
// state, compares it after every session, and tells the operator, once per change, what
// appeared or changed.

// cliConfigPaths are the names, in the chamber, that an agent CLI loads from its working
// directory and that can make it run code (docs/AGENTS.md says what each one loads).
var cliConfigPaths = []string{
	".claude",        // Claude Code: settings(.local).json hooks, apiKeyHelper, statusLine; commands, agents, skills
	".mcp.json",      // Claude Code: the project's MCP servers, each a process it starts
	".codex",         // Codex: the project's config.toml (mcp_servers, notify), prompts
	".opencode",      // opencode: plugin/ and plugins/ (.js, .ts: imported at start-up), tool/, command/, agent/, its config
	"opencode.json",  // opencode: the project's config (mcp, plugin, permission)
	"opencode.jsonc", // the same, with comments
}

// Bounds of the fingerprint, so that a chamber full of files (a node_modules under .opencode)
// costs a wake little: past maxCLIConfigFiles names the listing stops; past maxCLIConfigBytes
// of content, a file is fingerprinted by its size and modification time instead of its hash.
const (
	maxCLIConfigFiles = 2000
	maxCLIConfigBytes = 8 << 20
	maxCLIConfigDepth = 16
	cliConfigTrunc    = "…" // the key that says the listing stopped
)

// cliConfigFingerprint lists the code-bearing CLI configuration in the chamber: each file's
// path (relative to the chamber) with its content hash, each symlink as one (never followed),
// anything else by its type. It reads only through the confined opener.
func (r *runner) cliConfigFingerprint() map[string]string {
	fp := map[string]string{}
	if r.fs == nil {
		return fp
	}
	budget := int64(maxCLIConfigBytes)
	seen := 0 // every name visited, directories too (an empty one is no line of fp)
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		if len(fp) >= maxCLIConfigFiles || seen >= maxCLIConfigFiles {
			fp[cliConfigTrunc] = fmt.Sprintf("more than %d names", maxCLIConfigFiles)
			return
		}
		seen++
		fi, err := r.fs.Lstat(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return
		case err != nil:
			fp[rel] = "unreadable"
			return
		case fi.Mode()&fs.ModeSymlink != 0:
			fp[rel] = "symlink"
		case fi.IsDir():
			if depth >= maxCLIConfigDepth {
				fp[rel+"/"] = "too deep"
				return
			}
			ents, err := r.fs.ReadDir(rel)
			if err != nil {
				fp[rel+"/"] = "unreadable"
				return
			}
			names := make([]string, len(ents))
			for i, e := range ents {
				names[i] = e.Name()
			}
			sort.Strings(names)
			for _, n := range names {
				walk(path.Join(rel, n), depth+1)
			}
		case fi.Mode().IsRegular():
			meta := fmt.Sprintf("size %d, modified %s", fi.Size(), fi.ModTime().UTC().Format(time.RFC3339Nano))
			if fi.Size() > budget {
				fp[rel] = meta
				return
			}
			// A file the confined opener refuses (a hard link: its other name may be outside)
			// is fingerprinted by what Lstat says of it.
			if fp[rel] = r.hashConfined(rel, budget); fp[rel] == "unreadable" {
				fp[rel] = "unreadable, " + meta
			}
			budget -= fi.Size()
		default:
			fp[rel] = confined.TypeWord(fi.Mode().Type()) // fifo, socket, device, other
		}
	}
	for _, p := range cliConfigPaths {
		walk(p, 0)
	}
	return fp
}

// hashConfined is the sha256 of a file in the chamber, or why it cannot be read.
func (r *runner) hashConfined(rel string, limit int64) string {
	f, err := r.fs.Open(rel)
	if err != nil {
		return "unreadable"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, limit)); err != nil {
		return "unreadable"
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// loadCLIConfig is the fingerprint recorded last (nil when there is none).
func (r *runner) loadCLIConfig() (map[string]string, bool) {
	data, err := r.store.read(cliConfigName, 16<<20)
	if err != nil {
		return nil, false
	}
	var fp map[string]string
	if json.Unmarshal(data, &fp) != nil {
		return nil, false
	}
	return fp, true
}

func (r *runner) saveCLIConfig(fp map[string]string) {
	data, _ := json.MarshalIndent(fp, "", "  ")
	if err := r.store.write(cliConfigName, append(data, '\n'), nil); err != nil {
		r.warnf("cannot record the CLI configuration in the chamber: %v", err)
	}
}

// recordCLIConfig takes the fingerprint the operator's start accepts, and names what is there.
func (r *runner) recordCLIConfig() {
	fp := r.cliConfigFingerprint()
	r.saveCLIConfig(fp)
	if names := sortedKeys(fp); len(names) > 0 {
		r.printf("note: the chamber holds CLI configuration that can run code (an agent CLI run in it loads it): %s", clipList(names, 10))
	}
}

// reportCLIConfig compares the chamber's CLI configuration with the fingerprint recorded last,
// after session n: what appeared or changed is told to the operator in a notice, once (the
// new fingerprint is recorded at once). A chamber without a recorded fingerprint (started by
// an earlier cryochamber) records one silently.
func (r *runner) reportCLIConfig(ctx context.Context, n int) {
	if r.fs == nil {
		return
	}
	now := r.cliConfigFingerprint()
	before, ok := r.loadCLIConfig()
	if ok && mapsEqual(before, now) {
		return
	}
	r.saveCLIConfig(now)
	if !ok {
		return
	}
	var added, changed []string
	for k, v := range now {
		old, had := before[k]
		switch {
		case !had:
			added = append(added, k)
		case old != v:
			changed = append(changed, k)
		}
	}
	if len(added)+len(changed) == 0 {
		return // only removals: nothing that can run
	}
	sort.Strings(added)
	sort.Strings(changed)
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "added "+clipList(added, 20))
	}
	if len(changed) > 0 {
		parts = append(parts, "changed "+clipList(changed, 20))
	}
	msg := fmt.Sprintf("session %d left CLI configuration that can run code in the chamber (%s). Claude Code, Codex and opencode load it from their working directory: one run by hand in %s would run it as you, outside any sandbox, and so would a CMD naming another CLI. Look at it before you do; remove what you did not put there",
		n, strings.Join(parts, "; "), r.dir)
	r.warnf("%s", msg)
	r.notify(ctx, n, "cli-config", msg)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// clipList quotes at most max names (a name is the agent's: quoted, it cannot break a line or
// drive a terminal) and says how many more there are.
func clipList(names []string, max int) string {
	var q []string
	for i, n := range names {
		if i == max {
			q = append(q, fmt.Sprintf("and %d more", len(names)-max))
			break
		}
		q = append(q, fmt.Sprintf("%q", n))
	}
	return strings.Join(q, ", ")
}
