# A throwaway bifocald for the benchmark scripts; source it, then:
#   bench_daemon_start BIFOCALD DIR   starts BIFOCALD on DIR/bench.db at a
#                                     free port and waits for it: its
#                                     address is 127.0.0.1:$(cat DIR/port),
#                                     its token DIR/bench.db.token
#   bench_daemon_stop                 stops it (also done on exit)
# $bench_tmp is a scratch folder, removed on exit.
bench_tmp=$(mktemp -d)
bench_daemon_pid=""

bench_daemon_start() {
    "$1" --db "$2/bench.db" --listen 127.0.0.1:0 --port-file "$2/port" \
        --log-level warn 2>"$2/daemon.log" &
    bench_daemon_pid=$!
    for _ in $(seq 200); do [ -s "$2/port" ] && break; sleep 0.05; done
}

bench_daemon_stop() {
    [ -n "$bench_daemon_pid" ] && kill "$bench_daemon_pid" 2>/dev/null &&
        wait "$bench_daemon_pid" || true
    bench_daemon_pid=""
}

trap 'bench_daemon_stop; rm -rf "$bench_tmp"' EXIT
