#!/bin/sh
# The last lines of `make test`: gotestsum runs this after its own summary (--post-run-command),
# which has already listed every skipped test with its reason and every failed test with its
# output. TESTS_* come from gotestsum.
set -eu
passed=$((TESTS_TOTAL - TESTS_FAILED - TESTS_SKIPPED))
line="passed $passed, failed $TESTS_FAILED, skipped $TESTS_SKIPPED"
[ "${TESTS_ERRORS:-0}" -eq 0 ] || line="$line, package errors $TESTS_ERRORS"
echo "$line"
case "${CRYO_REQUIRE_E2E:-}" in
"" | 0) [ "$TESTS_SKIPPED" -eq 0 ] || echo "(real components not required: set CRYO_REQUIRE_E2E=1, as CI does, to make a skipped end-to-end test fail)" ;;
*) echo "(CRYO_REQUIRE_E2E is set: a real-component test that cannot run here fails instead of skipping)" ;;
esac
