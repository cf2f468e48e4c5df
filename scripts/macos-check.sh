#!/bin/bash
# macos-check.sh: what only a real Mac can show about cryochamber's launchd backend.
#
# For anyone with a Mac, logged in to its desktop: it starts a throwaway chamber whose first
# session asks for a wake two minutes ahead, waits for launchd to run the second session, and
# prints a report (Markdown) to paste into docs/MACOS.md, "Reports from real Macs":
#   - whether the wake fired, and how late, in the Mac's own zone (with $TZ set to another one);
#   - what `launchctl print` shows for the wake (calendar) and the dead-man (StartInterval);
#   - what launchd logged about the jobs (`log show`, lines naming "StartCalendarInterval");
#   - how many "Background Items Added" notifications the run raised;
#   - quarantine attributes, disabled labels, and the sleep settings (pmset);
#   - the session sandbox (sandbox-exec): what session 2 could see and do from inside it
#     (cryochamber's state, ~/.ssh, a write to $HOME, launchctl); every probe must fail.
#
# Usage: scripts/macos-check.sh [path/to/cryochamber]   (default: bin/cryochamber, then PATH)
# It writes only under ~/cryo-macos-check.*, and cancels the chamber at the end (the plists
# go with it). It needs no root. Nothing runs while the Mac sleeps: keep it awake for ~4 min.
set -euo pipefail

if [ "$(uname -s)" != Darwin ]; then
	echo "macos-check: this is for macOS (launchd); here the stand-in tests cover what Linux can show" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-}
if [ -z "$bin" ]; then
	if [ -x "$root/bin/cryochamber" ]; then bin=$root/bin/cryochamber; else bin=$(command -v cryochamber || true); fi
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	echo "macos-check: no cryochamber binary: run make build, or give its path" >&2
	exit 2
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

uid=$(id -u)
work=$(mktemp -d "$HOME/cryo-macos-check.XXXXXX")
chamber=$work/chamber
mkdir -p "$chamber"
started=$(date +%s)
startiso=$(date -u +%Y-%m-%dT%H:%M:%SZ)
keep=${KEEP:-}
cleanup() {
	"$bin" cancel --dir "$chamber" >/dev/null 2>&1 || true
	if [ -z "$keep" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# The wake two minutes ahead, on a whole minute, in UTC: the report compares it with when
# launchd really ran session 2.
wake_s=$(( (started + 120 + 59) / 60 * 60 ))
wake=$(date -u -r "$wake_s" +%Y-%m-%dT%H:%MZ)

cat >"$chamber/plan.md" <<'EOF'
macos-check: session 1 asks for a wake; session 2 records when it ran and ends the plan.
EOF
cat >"$chamber/cryo.toml" <<'EOF'
agent = "./agent.sh"
backend = "launchd"
EOF
cat >"$chamber/agent.sh" <<EOF
#!/bin/sh
if [ "\$CRYO_SESSION" = 1 ]; then
	echo '[CRYO:EXIT 0] armed'
	echo '[CRYO:WAKE $wake]'
else
	date -u +%s > fired
	# The sandbox: each probe must fail inside it (the chamber is all it may write).
	{
	ls "\$HOME/Library/Application Support/cryochamber" "\$HOME/.local/state/cryochamber" >/dev/null 2>&1 && echo "LEAK: the state directory is readable"
	ls "\$HOME/.ssh" >/dev/null 2>&1 && echo "LEAK: ~/.ssh is readable"
	(echo x > "\$HOME/cryo-sandbox-escape") 2>/dev/null && echo "LEAK: wrote \$HOME/cryo-sandbox-escape"
	launchctl list >/dev/null 2>&1 && echo "LEAK: launchctl ran"
	echo done
	} > sandbox.txt 2>&1
	echo '[CRYO:EXIT 0] fired'
fi
EOF
chmod +x "$chamber/agent.sh"

# Another zone in $TZ than the Mac's: the calendar must follow /etc/localtime regardless.
zone=$(readlink /etc/localtime | sed -e 's|.*/zoneinfo\(\.default\)\{0,1\}/||')
tz=Pacific/Kiritimati
[ "$zone" = "$tz" ] && tz=America/Adak

echo "macos-check: starting a chamber in $chamber (wake at $wake, TZ=$tz, the Mac is in $zone)" >&2
startout=$(TZ=$tz "$bin" start "$chamber/plan.md" 2>&1) || {
	echo "$startout" >&2
	echo "macos-check: start failed (see above)" >&2
	exit 1
}

id=$("$bin" status --dir "$chamber" --json | grep -o '"id": *"cryo-[a-z0-9-]*"' | sed 's/.*"\(cryo-[a-z0-9-]*\)"/\1/')
wakelabel=dev.cryochamber.$id.wake
[ -e "$HOME/Library/LaunchAgents/$wakelabel.plist" ] || wakelabel=$wakelabel.alt
fblabel=dev.cryochamber.$id.fallback
printwake=$(launchctl print "gui/$uid/$wakelabel" 2>&1 || true)
printfb=$(launchctl print "gui/$uid/$fblabel" 2>&1 || true)
# Before session 2 ends the plan and removes them.
plistq=none
for f in "$HOME/Library/LaunchAgents/dev.cryochamber.$id".*.plist; do
	if q=$(xattr -p com.apple.quarantine "$f" 2>/dev/null); then plistq="$q ($(basename "$f"))"; fi
done

echo "macos-check: waiting for launchd to run session 2 (up to 4 minutes; keep the Mac awake)" >&2
deadline=$((wake_s + 120))
while [ ! -s "$chamber/fired" ] && [ "$(date +%s)" -lt "$deadline" ]; do
	sleep 5
done
if [ -s "$chamber/fired" ]; then
	fired_s=$(cat "$chamber/fired")
	# The session starts a few seconds after launchd runs `wake`: the agent's clock is an upper
	# bound of the fire.
	late=$((fired_s - wake_s))
	fired=$(date -u -r "$fired_s" +%Y-%m-%dT%H:%M:%SZ)
	verdict="PASS: session 2 ran at $fired, ${late}s after the wake"
	[ "$late" -ge 0 ] && [ "$late" -le 90 ] || verdict="FAIL: session 2 ran at $fired, ${late}s from the wake"
else
	verdict="FAIL: session 2 did not run within 2 minutes of the wake at $wake"
fi

since=$(( $(date +%s) - started + 60 ))
launchdlog=$(log show --last "${since}s" --info --style compact \
	--predicate "process == \"launchd\" AND eventMessage CONTAINS \"dev.cryochamber.$id\"" 2>/dev/null || true)
registered=$(printf '%s\n' "$launchdlog" | grep -c 'StartCalendarInterval' || true)
btm=$(log show --last "${since}s" --info --style compact \
	--predicate 'subsystem == "com.apple.backgroundtaskmanagement" OR process == "BackgroundTaskManagementAgent"' 2>/dev/null || true)
btmnotes=$(printf '%s\n' "$btm" | grep -ci 'notif' || true)
btmours=$(printf '%s\n' "$btm" | grep -c 'cryochamber' || true)

sandbox="FAIL: session 2 did not record its sandbox probes"
if [ -s "$chamber/sandbox.txt" ]; then
	if grep -q LEAK "$chamber/sandbox.txt"; then sandbox="FAIL: $(grep LEAK "$chamber/sandbox.txt" | tr '\n' ';')"; else sandbox="PASS: state, ~/.ssh, \$HOME and launchctl out of reach"; fi
fi
rm -f "$HOME/cryo-sandbox-escape"
quarantine=$(xattr -p com.apple.quarantine "$bin" 2>/dev/null || echo none)
disabled=$(launchctl print-disabled "gui/$uid" 2>/dev/null | grep 'dev\.cryochamber' || echo "(none)")

cat <<EOF

### $(sw_vers -productName) $(sw_vers -productVersion) ($(sw_vers -buildVersion)), $(uname -m), $(date -u +%Y-%m-%d)

- cryochamber: \`$("$bin" --version 2>/dev/null || echo unknown)\`, started at $startiso
- system zone (/etc/localtime): \`$zone\`; \$TZ for \`start\`: \`$tz\`
- **$verdict**
- sandbox (\`$("$bin" status --dir "$chamber" --json 2>/dev/null | grep -o '"sandbox": *"[a-z-]*"' || echo unknown)\`): **$sandbox**
- step 5 at start: \`$(printf '%s\n' "$startout" | grep 'step 5' | sed 's/  */ /g' || true)\`
- \`launchctl print\` of the wake, calendar:
\`\`\`
$(printf '%s\n' "$printwake" | sed -n '/descriptor = {/,/}/p')
\`\`\`
- \`launchctl print\` of the dead-man (what a StartInterval job shows):
\`\`\`
$(printf '%s\n' "$printfb" | grep -E 'state =|interval|runs =|last exit' || echo "(nothing matched)")
\`\`\`
- \`log show\` (launchd, lines naming the chamber): $(printf '%s\n' "$launchdlog" | grep -c 'dev.cryochamber' || true), of which naming StartCalendarInterval: $registered
\`\`\`
$(printf '%s\n' "$launchdlog" | grep 'dev.cryochamber' | grep -iE 'calendar|interval|spawn|exit' | head -n 12 | grep . || echo "(none about calendars, intervals, spawns or exits)")
\`\`\`
- Background Items (BackgroundTaskManagement) log lines during the run: $(printf '%s\n' "$btm" | grep -c . || true), mentioning a notification: $btmnotes, naming cryochamber: $btmours
- quarantine: binary \`$quarantine\`, plists \`$plistq\`
- disabled labels: \`$disabled\`
- sleep settings (\`pmset -g\`): \`$(pmset -g 2>/dev/null | grep -E '^ (sleep|standby|powernap|autorestart) ' | tr -s ' ' | tr '\n' ';')\`
EOF
