package sandbox

import (
	"fmt"
	"strings"
)

// SeatbeltProfile is the sandbox-exec (Seatbelt) profile of p: the same policy as BwrapArgs,
// in the terms macOS has. Everything may be read except the hidden paths; writes go only to
// the chamber, the Writable and Scratch paths and the few devices every program writes; the
// rules come from the shallowest path to the deepest, and in SBPL the last matching rule
// wins, so a deeper path overrides its parent as a deeper mount does under bubblewrap.
//
// What macOS cannot give the same way: processes outside are not hidden (there is no PID
// namespace; signals to other users' processes are refused by the kernel as usual, and
// process-info of others is denied here), and launchd is reached through the bootstrap port
// every process has, so the profile denies running launchctl and looking up launchd's XPC
// services by name instead.
func SeatbeltProfile(p Policy) string {
	var b strings.Builder
	b.WriteString("(version 1)\n(allow default)\n")
	b.WriteString("; nothing is written outside what the rules below allow\n(deny file-write*)\n")
	b.WriteString("(allow file-write* (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/dtracehelper\") (regex #\"^/dev/fd/\") (regex #\"^/dev/tty[a-z]*[0-9]+$\") (regex #\"^/dev/ttys[0-9]+$\"))\n")
	b.WriteString("; no other process is inspected or signalled, no service is started through launchd\n")
	b.WriteString("(deny process-info* (target others))\n(deny signal (target others))\n")
	b.WriteString("(deny process-exec (literal \"/bin/launchctl\") (literal \"/usr/bin/osascript\"))\n")
	b.WriteString("; launchd's per-user sockets (the ssh-agent's among them)\n")
	b.WriteString("(deny network-outbound (remote unix-socket (path-regex #\"^/private/tmp/com\\.apple\\.launchd\\.\")))\n")
	b.WriteString("(deny mach-lookup (global-name-regex #\"^com\\.apple\\.xpc\\.launchd\") (global-name \"com.apple.backgroundtaskmanagementagent\") (global-name \"com.apple.coreservices.launchservicesd\"))\n")
	for _, m := range p.mounts() {
		q := sbString(m.path)
		match := fmt.Sprintf("(subpath %s)", q)
		if !m.dir && (m.kind == kHide || m.kind == kProtect) {
			match = fmt.Sprintf("(literal %s)", q)
		}
		switch m.kind {
		case kScratch, kWritable, kBind:
			fmt.Fprintf(&b, "(allow file-read* file-write* %s)\n", match)
		case kVisible, kBindRO:
			fmt.Fprintf(&b, "(allow file-read* %s)\n(deny file-write* %s)\n", match, match)
		case kHide, kProtect:
			fmt.Fprintf(&b, "(deny file-read* file-write* %s)\n", match)
		}
	}
	return b.String()
}

// sbString quotes s as an SBPL string literal (Check has refused control characters).
func sbString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
