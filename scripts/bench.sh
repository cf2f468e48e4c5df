#!/bin/sh
# make bench: every measurement of docs/BENCHMARKS.md at full size (logs of 1 MiB to 1 GiB, a
# five-year chamber, 1/10/100 chambers in one user manager, a 505 MiB latest block, a 500 MB
# agent output, 31 wakes, 24 timer firings, the dashboard's chamber page and overview from a real
# `cryochamber web`), against the binary `make build` made (or
# $CRYOCHAMBER), then one table. It needs root, unshare and /lib/systemd/systemd (private systemd
# user managers, as the tests use), GNU time (/usr/bin/time, for peak RSS) and strace (for the
# wake's phases); about 5 GB free in $TMPDIR; and takes about 13 minutes at full size. It is not
# part of `make test`.
#
# Every compared figure (a ratio) is the median of paired rounds: in each round every case runs
# once, in turn, and the ratio is taken within the round; the table prints beside it the number
# of rounds, the spread of the per-round ratios (min–max, IQR) and the load average over them
# (internal/bench/paired_bench_test.go). A target met at a load above 2 says "not final".
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${CRYOCHAMBER:-$root/bin/cryochamber}
[ -x "$bin" ] || { echo "bench: $bin is missing: run make build" >&2; exit 1; }
case "$bin" in /*) ;; *) bin=$(pwd)/$bin ;; esac

out=$(mktemp -d "${TMPDIR:-/tmp}/cryo-bench.XXXXXX")
echo "bench: measuring $bin (a few minutes; the whole output goes to $out/bench.log)"
echo "bench: load average now: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
cd "$root"
status=0
go test -run '^$' -bench . -benchtime 1x -timeout 40m ./internal/bench \
	-args -cryo.full -cryo.bin "$bin" -cryo.table "$out/table.md" >"$out/bench.log" 2>&1 || status=$?
# Skips and failures first (a benchmark that skips says why), then the table.
grep -E -- '--- (SKIP|FAIL)|^FAIL|^panic|: (skipped|systemdtest)' "$out/bench.log" || true
if [ -s "$out/table.md" ]; then
	cat "$out/table.md"
else
	echo "bench: no table was written; see $out/bench.log" >&2
	tail -n 40 "$out/bench.log" >&2
	[ "$status" -ne 0 ] || status=1
fi
echo
echo "bench: load average at the end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
echo "bench: whole output in $out/bench.log"
exit "$status"
