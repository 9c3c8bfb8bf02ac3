#!/usr/bin/env bash
# The report in a real browser: writes the fixture database, its report, and
# opens it in Debian's headless chromium (browser/check_report.js): every
# figure drew data, no band leaves its possible range, a legend click
# toggles a group, no legend or key has more than 12 entries, no console
# error, no network request; and the spectral figures of a 4-layer, 8-head
# model.  The screenshot is left in OUT_DIR (the build tree).
#
#   test_report_browser.sh BIFOCAL RESULTS_FIXTURE OUT_DIR
set -euo pipefail
bifocal=$1 fixture=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/browser/node_modules/playwright-core" ]; then
    echo "FAIL: playwright-core is not installed: run scripts/browser-deps.sh" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$fixture" "$tmp/fixture.db"
"$bifocal" report 1 --db "$tmp/fixture.db" -o "$out/report-fixture.html"
# 5 figures: accuracy and loss against depth, training loss, and for the
# first learnable group its frequency ratios and final spectrum.
node "$here/browser/check_report.js" "$out/report-fixture.html" \
    "$out/report-fixture.png" 5
# A 4-layer, 8-head spectral model (256 learnable pairs, fixture sweep 5):
# the spectral evolution is a heatmap of 256 rows, the raw lines (on demand,
# one figure per layer) and the final spectrum keep every legend and key to
# a dozen entries.
"$bifocal" report 5 --db "$tmp/fixture.db" -o "$out/report-wide.html"
node "$here/browser/check_report.js" "$out/report-wide.html" \
    "$out/report-wide.png" 4 0 256
