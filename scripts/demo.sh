#!/bin/sh
# make demo: the bundled example plan (examples/demo) with its scripted demo agent, three short
# sessions on real OS timers, then the timeline. It uses your systemd user manager when there is
# one; as root without one (a container, CI) it starts a private user manager in its own mount
# namespace, the way the tests do; otherwise it says what is missing.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CRYOCHAMBER:-$root/bin/cryochamber}
[ -x "$bin" ] || { echo "demo: $bin is missing: run make build" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cryo-demo.XXXXXX")
cp -R "$root/examples/demo" "$work/chamber"
sd_pid=""
own_home="" # set when the demo runs its own user manager with its own HOME
cleanup() {
	if [ -n "$sd_pid" ]; then
		kill "$sd_pid" 2>/dev/null || true
		wait "$sd_pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT INT TERM

if systemctl --user show-environment >/dev/null 2>&1; then
	echo "demo: using your systemd user manager"
elif [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 && [ -x /lib/systemd/systemd ]; then
	echo "demo: no systemd user manager here; starting a private one (root, unshare)"
	export HOME="$work/home" XDG_RUNTIME_DIR="$work/run"
	own_home="HOME=$HOME "
	unset XDG_CONFIG_HOME DBUS_SESSION_BUS_ADDRESS || true
	mkdir -p "$HOME" && mkdir -m 700 "$XDG_RUNTIME_DIR"
	unshare -m sh -c 'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && exec /lib/systemd/systemd --user' \
		>"$work/manager.log" 2>&1 &
	sd_pid=$!
	i=0
	while [ ! -S "$XDG_RUNTIME_DIR/systemd/private" ]; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$sd_pid" 2>/dev/null; then
			echo "demo: the private user manager did not start:" >&2
			cat "$work/manager.log" >&2
			exit 1
		fi
		sleep 0.1
	done
else
	echo "demo: needs a systemd user manager (systemctl --user), or root with unshare and /lib/systemd/systemd to start a private one" >&2
	echo "hint: log in with a user session (or: loginctl enable-linger \$USER), then run make demo again" >&2
	exit 1
fi

# Sessions run in a sandbox (bubblewrap); a fresh machine may not have it yet. The demo agent is
# ours, so there the demo runs unconfined, and says so (start would refuse, as it should for a
# real agent).
if ! bwrap --ro-bind / / true >/dev/null 2>&1; then
	echo "demo: bubblewrap does not work here (apt install bubblewrap; see README, Security):"
	echo "demo: running the demo agent without the session sandbox ([sandbox] mode = \"off\")"
	printf '\n[sandbox]\nmode = "off"\n' >>"$work/chamber/cryo.toml"
fi

echo "demo: chamber $work/chamber"
echo
"$bin" start "$work/chamber/plan.md"
echo
echo "demo: session 1 done; the OS timer will run sessions 2 and 3. Waiting..."
i=0
while :; do
	phase=$("$bin" status --dir "$work/chamber" --json | grep -o '"phase": *"[a-z]*"' | head -n 1 | sed 's/.*"\([a-z]*\)"$/\1/')
	case "$phase" in
	complete) break ;;
	failed|cancelled) echo "demo: the chamber ended $phase" >&2; "$bin" status --dir "$work/chamber" >&2; exit 1 ;;
	esac
	i=$((i + 1))
	if [ $i -gt 120 ]; then
		echo "demo: not complete after 60s" >&2
		"$bin" status --dir "$work/chamber" >&2
		exit 1
	fi
	sleep 0.5
done

echo
echo "== timeline (cryo.log block boundaries) =="
grep -E '^--- CRYO (SESSION|END) ' "$work/chamber/cryo.log"
echo
echo "== what the agent remembered (NOTES.md) =="
cat "$work/chamber/NOTES.md"
echo
echo "== status =="
"$bin" status --dir "$work/chamber"
echo
left=$(ls "${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user" 2>/dev/null | grep -c '^cryo-' || true)
echo "demo: plan complete after 3 sessions on real timers; cryo units left installed: $left"
# The chamber's state lives under the demo's HOME when it ran its own manager: the hint says so,
# so that it works pasted in the shell that ran the demo.
echo "demo: the whole log: $own_home$bin log --dir $work/chamber"
