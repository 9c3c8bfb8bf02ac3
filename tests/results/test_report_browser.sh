#!/usr/bin/env bash
# The report in a real browser: writes the fixture database, four of its
# reports and the quickstart's (research/examples), and opens them and the
# dashboard's sweep page in one headless chromium (Debian's) at 1400 px
# (browser/check_report.js): every figure drew data, no band leaves its
# possible range, a legend click toggles a group, no legend or key has
# more than 12 entries, no console error, no network request; what reads
# at a glance (4 significant digits, a group's one colour, no sideways
# scrolling, no band of n <= 2, one heatmap scale, a search's slice plot);
# and the spectral figures of a 4-layer, 8-head model.  The screenshots
# are left in OUT_DIR (the build tree).
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
for sweep in 1 4 5 9; do
    "$bifocal" report $sweep --db "$tmp/fixture.db" -o "$out/report-$sweep.html"
done
# The quickstart's own report, from the data the README's example is
# made of (research/examples/, scripts/examples.sh).
"$bifocal" report 1 --db "$here/../../research/examples/quickstart.db" \
    -o "$out/report-quickstart.html"
# One browser for the four reports (five arguments each: report,
# screenshot, at least so many figures, screenshot height, spectral pairs).
# Sweep 1: accuracy and loss against depth, training loss, and for the
# first learnable group its frequency ratios and final spectrum; sweep 4:
# the quickstart's shape, two seeds a group (no band: the seeds); sweep 5:
# a 4-layer, 8-head spectral model (256 learnable pairs): the spectral
# evolution is a heatmap of 256 rows, the raw lines (on demand, one figure
# per layer) and the final spectrum keep every legend and key to a dozen
# entries; sweep 9: a search (tune, two of its trials pruned at step 50)
# and its confirm stage with adaptive seeds: the search's slice plot and
# trials, the pruned ones ringed and listed with their rung; the
# quickstart's report (three encodings, two seeds each, eval depths 4, 8
# and 16, learned frequencies).
# The dashboard's sweep page of sweep 9 (one dashboard on the same
# database), checked at a glance as the reports are.
"$bifocal" dashboard --db "$tmp/fixture.db" --listen 127.0.0.1:0 \
    --port-file "$tmp/port" > "$tmp/dashboard.log" 2>&1 &
dash=$!
trap 'kill $dash 2>/dev/null; wait $dash 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { cat "$tmp/dashboard.log" >&2; echo "FAIL: no dashboard" >&2; exit 1; }
node "$here/browser/check_report.js" \
    "$out/report-1.html" "$out/report-fixture.png" 5 0 0 \
    "$out/report-4.html" "$out/report-seeds.png" 3 0 0 \
    "$out/report-5.html" "$out/report-wide.png" 4 0 256 \
    "$out/report-9.html" "$out/report-tuned.png" 4 0 0 \
    "$out/report-quickstart.html" "$out/report-quickstart.png" 5 0 0 \
    --dashboard "http://127.0.0.1:$(cat "$tmp/port")/sweeps/9" "$out/dashboard-sweep.png"
