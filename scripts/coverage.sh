#!/usr/bin/env bash
# Builds with -Db_coverage=true, runs every test, and prints line and
# branch coverage per folder (gcovr), then the total.  The HTML detail goes to
# BUILD/coverage/index.html.
#
# usage: scripts/coverage.sh [BUILD_DIR]     (default build-coverage)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" "${COVERAGE_PKGS[@]}"
dir=${1:-build-coverage}
# Atomic counters: the daemon and the worker run threads (thread pool,
# link thread), and racing increments once left a negative count that
# gcovr refused to parse.
[ -d "$dir" ] || meson setup "$dir" -Db_coverage=true -Dc_args=-fprofile-update=atomic
meson compile -C "$dir"
# Counters accumulate across runs: start from zero.
find "$dir" -name '*.gcda' -delete
meson test -C "$dir" --num-processes 2 --timeout-multiplier 3 --print-errorlogs >"$dir/coverage-tests.log" 2>&1 \
    || { tail -n 30 "$dir/coverage-tests.log"; echo "coverage: tests failed" >&2; exit 1; }

folders=(common stream engine worker server results dashboard cli)
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
printf '%-10s %8s %8s %7s %9s %8s %7s\n' folder lines covered percent \
    branches covered percent
for f in "${folders[@]}"; do
    gcovr --root . --filter "$f/" --object-directory "$dir" --json-summary "$summary" \
        >/dev/null 2>&1
    python3 - "$f" "$summary" <<'PY'
import json, sys
s = json.load(open(sys.argv[2]))
print(f"{sys.argv[1] + '/':<10} {s['line_total']:>8} {s['line_covered']:>8} "
      f"{s['line_percent']:>6.1f}% {s['branch_total']:>9} {s['branch_covered']:>8} "
      f"{s['branch_percent']:>6.1f}%")
PY
done
filter=$(printf -- '--filter %s/ ' "${folders[@]}")
# shellcheck disable=SC2086
gcovr --root . $filter --object-directory "$dir" --json-summary "$summary" >/dev/null 2>&1
python3 - "$summary" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{'total':<10} {s['line_total']:>8} {s['line_covered']:>8} "
      f"{s['line_percent']:>6.1f}% {s['branch_total']:>9} {s['branch_covered']:>8} "
      f"{s['branch_percent']:>6.1f}%")
PY
mkdir -p "$dir/coverage"
# shellcheck disable=SC2086
gcovr --root . $filter --object-directory "$dir" --html-details "$dir/coverage/index.html" \
    >/dev/null 2>&1
echo "detail: $dir/coverage/index.html"
