#!/usr/bin/env bash
# The screenshots of docs/screenshots/ (linked from README.md), from the
# results fixture (tests/results/results_fixture.c) through headless
# chromium (scripts/report_png.js; scripts/browser-deps.sh installs it):
# the quickstart's report (from the data README.md's example is made
# of, research/examples/quickstart.db: the three encodings, two seeds
# each, eval depths 4, 8 and 16, training curves and learned
# frequencies), the report of a search, two of its trials pruned, and its
# confirm stage with seeds until decided (sweep 9),
# and the dashboard's sweep page (sweep 9).
#
#   scripts/screenshots.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=docs/screenshots
tmp=$(mktemp -d)
dash=
cleanup() {
    if [ -n "$dash" ]; then kill "$dash" 2>/dev/null || true; wait "$dash" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$out"
"$build/tests/results/results_fixture" "$tmp/fixture.db"
"$build/cli/bifocal" report 1 --db research/examples/quickstart.db -o "$tmp/report-1.html"
"$build/cli/bifocal" report 9 --db "$tmp/fixture.db" -o "$tmp/report-9.html"
node scripts/report_png.js --page "file://$tmp/report-1.html" "$out/report-quickstart.png" 2600
node scripts/report_png.js --page "file://$tmp/report-9.html" "$out/report-search.png" 1300
"$build/cli/bifocal" dashboard --db "$tmp/fixture.db" --listen 127.0.0.1:0 \
    --port-file "$tmp/port" >"$tmp/dashboard.log" 2>&1 &
dash=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { cat "$tmp/dashboard.log" >&2; exit 1; }
node scripts/report_png.js --page "http://127.0.0.1:$(cat "$tmp/port")/sweeps/9" \
    "$out/dashboard-sweep.png" 1600
ls -l "$out"
