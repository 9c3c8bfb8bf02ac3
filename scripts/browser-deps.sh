#!/usr/bin/env bash
# Installs what the report's browser test needs: Debian's chromium, node and
# npm (TEST_PKGS in deps.sh), and playwright-core at the version locked in
# tests/results/browser/package-lock.json (`npm ci`, only when missing or
# stale).  playwright-core drives /usr/bin/chromium; it downloads no browser.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs chromium nodejs
command -v npm >/dev/null || bf_install_pkgs npm
dir=tests/results/browser
if [ ! -f "$dir/node_modules/.package-lock.json" ] \
   || ! cmp -s <(sed -n '/"node_modules\//,$p' "$dir/package-lock.json") \
               <(sed -n '/"node_modules\//,$p' "$dir/node_modules/.package-lock.json"); then
    (cd "$dir" && npm ci --no-audit --no-fund)
fi
