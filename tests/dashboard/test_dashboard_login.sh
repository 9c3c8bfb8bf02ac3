#!/usr/bin/env bash
# Signing in to the dashboard in a real browser from another host: the
# dashboard runs on h1 and Debian's headless chromium on h2, network
# namespaces of scripts/cluster-hosts.sh (needs root; where they cannot be
# made, the test fails), so the dashboard sees a peer beyond loopback and
# asks for the token (tests/results/browser/check_login.js says what is checked).  The
# screenshot is left in OUT_DIR (the build tree).
#
#   test_dashboard_login.sh BIFOCAL RESULTS_FIXTURE CLUSTER_HOSTS_SH OUT_DIR
set -euo pipefail
bifocal=$(realpath "$1") fixture=$2 hosts_sh=$(realpath "$3") out=$(realpath "$4")
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -d "$here/../results/browser/node_modules/playwright-core" ] \
    || fail "playwright-core is not installed: run scripts/browser-deps.sh"
tmp=$(mktemp -d)
cluster=bfl$(( $$ % 100000 ))
dash=
cleanup() {
    [ -n "$dash" ] && kill "$dash" 2>/dev/null && wait "$dash" 2>/dev/null
    "$hosts_sh" down "$cluster" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
"$fixture" "$tmp/fixture.db"
token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && echo "$token" > "$tmp/fixture.db.token")
"$hosts_sh" up "$cluster" 2 || fail "cannot make network namespaces (root and iproute2 needed)"
"$hosts_sh" exec "$cluster" h1 "$bifocal" dashboard --db "$tmp/fixture.db" \
    --listen 0.0.0.0:0 --port-file "$tmp/port" 2>"$tmp/dash.log" &
dash=$!
for _ in $(seq 200); do
    [ -s "$tmp/port" ] && break
    kill -0 "$dash" 2>/dev/null || fail "the dashboard did not start: $(cat "$tmp/dash.log")"
    sleep 0.05
done
[ -s "$tmp/port" ] || fail "the dashboard wrote no port file"
port=$(cat "$tmp/port")
"$hosts_sh" exec "$cluster" h2 node "$here/../results/browser/check_login.js" \
    "http://10.213.0.1:$port" "$port" "$token" "$out"
