package fakestate

import (
	"sort"
	"strings"
)

// Reply is one answer of the real launchctl that the stand-in replays: its exit status and
// text, where it was seen, and on which macOS. launchctl's failures are only ever seen on a
// Mac, so each comes from a public report by someone who met it; Note says whether the text is
// verbatim there or put together from what the report quotes.
//
// The texts hold placeholders the stand-in fills in: {uid}, {label}, {path}.
type Reply struct {
	Code   int
	Stdout string
	Stderr string
	MacOS  string // the macOS release it was seen on ("unknown" when the report does not say)
	Source string // the public report(s) it comes from
	Note   string
}

// Render fills in the placeholders.
func (r Reply) Render(uid, label, path string) (stdout, stderr string) {
	rep := strings.NewReplacer("{uid}", uid, "{label}", label, "{path}", path)
	return rep.Replace(r.Stdout), rep.Replace(r.Stderr)
}

// Replies are the answers the stand-in gives, by name.
var Replies = map[string]Reply{
	// Not loaded.
	"print-not-found": {
		Code:   113,
		Stderr: "Bad request.\nCould not find service \"{label}\" in domain for user gui: {uid}\n",
		MacOS:  "15 and 26.6.2",
		Source: "this project's first stand-in (commit 7bc7dcc, whose texts were taken from real output on macOS 15 and 26); the second line is also quoted by https://github.com/NousResearch/hermes-agent/issues/55441",
		Note:   "verbatim; exit status 113 as the first stand-in had it, and as kickstart gives for the same line",
	},
	"kickstart-not-found": {
		Code:   113,
		Stderr: "Could not find service \"{label}\" in domain for user gui: {uid}\n",
		MacOS:  "unknown (2021 and 2026 reports)",
		Source: "https://github.com/The-AI-Republic/pi-dash/pull/158 and https://github.com/geldata/gel-cli/pull/312 (`launchctl kickstart gui/501/<label>` of an unloaded job, exit code 113)",
		Note:   "verbatim line; the exit status is quoted by both",
	},
	"bootout-not-found-113": {
		Code:   113,
		Stderr: "Boot-out failed: 113: Could not find specified service\n",
		MacOS:  "15 and 26.6.2",
		Source: "this project's first stand-in (commit 7bc7dcc, whose texts were taken from real output on macOS 15 and 26); \"Could not find specified service\" also in https://github.com/kyleneideck/BackgroundMusic/issues/169",
		Note:   "verbatim",
	},
	"bootout-esrch-3": {
		Code:   3,
		Stderr: "Boot-out failed: 3: No such process\n",
		MacOS:  "26.5.2",
		Source: "https://github.com/NousResearch/hermes-agent/issues/95758 (macOS 26.5.2), https://github.com/The-AI-Republic/pi-dash/pull/158",
		Note:   "verbatim",
	},
	"bootout-in-progress-36": {
		Code:   36,
		Stderr: "Boot-out failed: 36: Operation now in progress\n",
		MacOS:  "10.15 (19A526h)",
		Source: "https://github.com/osquery/osquery/issues/5698 (the job does stop, afterwards)",
		Note:   "verbatim",
	},

	// A label launchd still holds, or will not load.
	"bootstrap-io-5": {
		Code:   5,
		Stderr: "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n",
		MacOS:  "13.1, 14, 15.4.1, 26.x",
		Source: "https://github.com/Homebrew/homebrew-services/issues/528 (13.1), https://github.com/pirj/noclamshell/issues/25, https://github.com/NousResearch/hermes-agent/issues/11323 (15.4.1)",
		Note:   "verbatim",
	},
	"bootstrap-disabled-5": {
		Code:   5,
		Stderr: "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n",
		MacOS:  "26.x",
		Source: "a disabled label answered with 5, not 119: https://github.com/nexu-io/nexu/pull/836, https://github.com/openclaw/openclaw/pull/849, https://github.com/csstaub/hue-scene-keeper/issues/22, https://github.com/NoeFabris/opencode-antigravity-auth/issues/543",
		Note:   "verbatim (the same text as any other 5)",
	},
	"bootstrap-disabled-119": {
		Code:   119,
		Stderr: "{path}: Service is disabled\nBootstrap failed: 119: Service is disabled\n",
		MacOS:  "13 (nix-installer), 26.5 (macprovider)",
		Source: "https://github.com/DeterminateSystems/nix-installer/issues/530 (verbatim, system domain), https://github.com/Augustas11/macprovider/pull/152 (macOS 26.5, gui domain)",
		Note:   "verbatim from nix-installer#530 with the path substituted",
	},
	"print-disabled-modern": {
		Code:   0,
		Stdout: "disabled services = {\n{entries}}\nlogin item associations = {\n\t\"com.docker.helper\" => \"com.docker.docker\"\n}\n",
		MacOS:  "26.5.1 (25F80); `=> enabled`/`=> disabled` since macOS 14",
		Source: "https://github.com/ggbond268/MacTools/pull/116 (\"=> disabled\" / \"=> enabled\", measured on 26.5.1)",
		Note:   "layout verbatim from ninehills/blog#85; values as measured in MacTools#116; {entries} is one `\\t\"label\" => disabled` line per label",
	},
	"print-disabled-legacy": {
		Code:   0,
		Stdout: "disabled services = {\n{entries}}\nlogin item associations = {\n\t\"version.com.docker.helper\" => \"64133\"\n\t\"com.docker.helper\" => \"com.docker.docker\"\n}\n",
		MacOS:  "before 14 (a 2021 report)",
		Source: "https://github.com/ninehills/blog/issues/85",
		Note:   "verbatim layout; {entries} is one `\\t\"label\" => true` line per label",
	},

	// No GUI login session: gui/<uid> does not exist (SSH only, nobody logged in).
	"print-no-domain-112": {
		Code:   112,
		Stderr: "Bad request.\nCould not find domain for user gui: {uid}\n",
		MacOS:  "26.x",
		Source: "https://github.com/duh17/oppi/issues/38 (probe status 112), https://github.com/lidge-jun/opencodex/issues/1770 (112 as the unavailable domain), https://github.com/openclaw/openclaw/pull/8642 (\"Could not find domain for user gui: 1000\")",
		Note:   "message as quoted by openclaw#8642, with the \"Bad request.\" line that print puts before every failure; status from oppi#38",
	},
	"print-no-domain-125": {
		Code:   125,
		Stderr: "Domain does not support specified action\n",
		MacOS:  "26.5.2",
		Source: "https://github.com/lidge-jun/opencodex/issues/1770 (`launchctl print gui/<uid>/<label>` on a headless SSH session, macOS 26.5.2), https://github.com/duh17/oppi/issues/38",
		Note:   "message as quoted in both; exit status 125 from opencodex#1770",
	},
	"bootstrap-no-domain-112": {
		Code:   112,
		Stderr: "Could not find domain for user gui: {uid}\n",
		MacOS:  "unknown (2026 report)",
		Source: "https://github.com/openclaw/openclaw/pull/8642 (`launchctl bootstrap failed: Could not find domain for user gui: 1000`)",
		Note:   "message as quoted; the status is the one print gives for the same condition",
	},
	"bootstrap-no-domain-125": {
		Code:   125,
		Stderr: "Bootstrap failed: 125: Domain does not support specified action\n",
		MacOS:  "26.x",
		Source: "https://github.com/Mic92/sops-nix/pull/966, https://github.com/duh17/oppi/issues/31, https://github.com/rjwalters/loom/issues/4130, https://github.com/nix-community/home-manager/issues/9629",
		Note:   "verbatim",
	},
	"bootstrap-no-domain-5": {
		Code:   5,
		Stderr: "Bootstrap failed: 5: Input/output error\nTry re-running the command as root for richer errors.\n",
		MacOS:  "unknown (2026 report)",
		Source: "https://github.com/psimaker/vaultsync/issues/89 (an SSH session without a GUI login dies with the raw 5)",
		Note:   "verbatim",
	},
	"kickstart-no-domain-125": {
		Code:   125,
		Stderr: "Could not kickstart service \"{label}\": 125: Domain does not support specified action\n",
		MacOS:  "26 (Tahoe)",
		Source: "https://github.com/NousResearch/hermes-agent/pull/30352 (an SSH-only user on a shared Mac mini)",
		Note:   "verbatim with the label substituted",
	},
}

// ReplyNames lists the replies in a stable order (for tests).
func ReplyNames() []string {
	names := make([]string, 0, len(Replies))
	for n := range Replies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
