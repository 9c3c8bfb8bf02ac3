# Shared by tests/cluster/*.sh (sourced): the test hosts, the coordinator on
# h1, worker groups started with mpirun --hostfile from one host onto others,
# and exact checks on the coordinator's database with the sqlite3 CLI.
#
# Needs: BUILD (build directory), CLUSTER (namespace prefix), WORK (scratch
# directory on the "shared file system": every namespace sees the same
# files, as compute nodes see NFS).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS="$ROOT/scripts/cluster-hosts.sh"
BIFOCALD="$BUILD/server/bifocald"
BIFOCAL="$BUILD/cli/bifocal"
WORKER="$BUILD/worker/bifocal-worker"
SUBNET=10.213.0.0/24
PORT=7070
COORD=h1:$PORT
export BF_CLUSTER=$CLUSTER OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Open MPI across the test hosts: launched through the namespace agent, TCP
# only (no shared memory between "hosts"), bound to the test network.  The
# OOB keep-alive makes mpirun and the remote orted notice a host that went
# silent within KEEPALIVE_S + 2 x 1 s (default: 300 s + 9 x 20 s), and take
# the group down: no rank waits forever in a collective on a dead peer.
KEEPALIVE_S=3
MPI_NET=(--mca plm_rsh_agent "$HOSTS rsh"
         --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET"
         --mca oob_tcp_if_include "$SUBNET"
         --mca oob_tcp_keepalive_time "$KEEPALIVE_S"
         --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 2
         --oversubscribe -x OPENBLAS_NUM_THREADS)

fail() {
    echo "FAIL: $*" >&2
    local f
    # The coordinator's logs, and Slurm's and its jobs' (slurm/).
    for f in "$WORK"/*.log "$WORK"/*/*.log "$WORK"/*/*.out; do
        [ -f "$f" ] || continue
        echo "---- tail of $f" >&2
        tail -n 15 "$f" >&2
    done
    exit 1
}

log() { echo "[$(date +%T)] $*"; }

# on_host hK CMD...: runs CMD on host hK.  Started with `&`, $! is CMD's own
# pid (cluster-hosts.sh execs into it), so signals reach it.
on_host() { "$HOSTS" exec "$CLUSTER" "$@"; }

# ---- the coordinator ------------------------------------------------------

DAEMON_PID=""

# start_daemon DB [LEASE_SECONDS]: bifocald on h1, listening on h1's
# address (not loopback); waits until it accepts connections.
start_daemon() {
    local db=$1 lease=${2:-30}
    "$HOSTS" exec "$CLUSTER" h1 "$BIFOCALD" --db "$db" --listen "10.213.0.1:$PORT" \
        --lease-seconds "$lease" --log-level info >> "$db.log" 2>&1 &
    DAEMON_PID=$!
    local _
    for _ in $(seq 100); do
        [ -s "$db.token" ] && on_host h2 "$BIFOCAL" --server "$COORD" \
            --token-file "$db.token" workers > /dev/null 2>&1 && return 0
        kill -0 "$DAEMON_PID" 2>/dev/null || fail "bifocald exited at start"
        sleep 0.1
    done
    fail "bifocald on h1 did not answer from h2 within 10 s"
}

stop_daemon() {
    [ -n "$DAEMON_PID" ] || return 0
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=""
}

# client DB ARGS...: the bifocal CLI, run from h2.
client() {
    local db=$1; shift
    on_host h2 "$BIFOCAL" --server "$COORD" --token-file "$db.token" "$@"
}

# ---- worker groups ----------------------------------------------------------

# start_group NAME DB LAUNCH_HOST "HOST:SLOTS ..." [WORKER ARGS]: one group,
# mpirun on LAUNCH_HOST, one rank per slot listed; pid in GROUP_PID[NAME].
declare -A GROUP_PID=()
start_group() {
    local name=$1 db=$2 launch=$3 places=$4; shift 4
    local hf="$WORK/$name.hosts" np=0 p
    : > "$hf"
    for p in $places; do
        echo "${p%%:*} slots=${p##*:}" >> "$hf"
        np=$((np + ${p##*:}))
    done
    "$HOSTS" exec "$CLUSTER" "$launch" mpirun --hostfile "$hf" -np "$np" "${MPI_NET[@]}" \
        "$WORKER" --server "$COORD" --token-file "$db.token" \
        --checkpoint-dir "$WORK/ckpt" --name "$name" "$@" \
        >> "$WORK/$name.log" 2>&1 &
    GROUP_PID[$name]=$!
}

# worker_ranks NAME...: the pids of the bifocal-worker ranks of the groups
# named NAME (mpirun or srun, which name the worker on their command lines
# too, are not ones).  Every test host shares this pid namespace.
worker_ranks() {
    local name p
    for p in $(pgrep -x bifocal-worker); do
        for name in "$@"; do
            if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null \
                   | grep -qE -- " --name $name( |\$)"; then
                echo "$p"
            fi
        done
    done
}

# wait_group NAME SECONDS: waits for the group's mpirun to exit; fails the
# test if it is still running after SECONDS.  Sets GROUP_RC.
wait_group() {
    local name=$1 limit=$2 pid=${GROUP_PID[$1]} _
    for _ in $(seq $((limit * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && fail "group $name still running after ${limit} s"
    GROUP_RC=0
    wait "$pid" || GROUP_RC=$?
    unset "GROUP_PID[$name]"
}

stop_groups() {
    local name
    for name in "${!GROUP_PID[@]}"; do
        kill -TERM "${GROUP_PID[$name]}" 2>/dev/null || true
    done
    for name in "${!GROUP_PID[@]}"; do
        wait "${GROUP_PID[$name]}" 2>/dev/null || true
        unset "GROUP_PID[$name]"
    done
}

# ---- the database -----------------------------------------------------------

sql() { sqlite3 -cmd '.timeout 5000' "$1" "$2"; }

# expect DB WHAT SQL VALUE: the query's output must be exactly VALUE.
expect() {
    local got
    got=$(sql "$1" "$3") || fail "$2: query failed ($3)"
    [ "$got" = "$4" ] || fail "$2: got '$got', expected '$4' ($3)"
    log "ok: $2 ($got)"
}

# wait_sql DB SQL SECONDS: until the query prints 1.
wait_sql() {
    local db=$1 q=$2 limit=$3 _
    for _ in $(seq $((limit * 5))); do
        [ "$(sql "$db" "$q" 2>/dev/null)" = 1 ] && return 0
        sleep 0.2
    done
    fail "waited ${limit} s for: $q"
}

# expect_complete DB JOBS [EXTRA]: every job of the sweep succeeded and
# every record it reports is stored exactly once (logged steps, the final
# evaluation, one results row per job), nothing else.  The counts follow
# from the test sweep's fields (write_sweep); EXTRA losses come from
# attempts a signal stopped between two logged steps (the trainer logs the
# step it stops at).
expect_complete() {
    local db=$1 jobs=$2 extra=${3:-0}
    expect "$db" "jobs succeeded" \
        "SELECT count(*) FROM jobs WHERE status = 'succeeded'" "$jobs"
    expect "$db" "one results row per job" "SELECT count(*) FROM results" "$jobs"
    expect "$db" "every logged loss stored once" \
        "SELECT count(*) FROM metrics WHERE key = 'loss'" \
        $((jobs * STEPS / LOG_EVERY + extra))
    expect "$db" "the final evaluation stored once per job and depth" \
        "SELECT count(*) FROM evals" $((jobs * 2))
}

# write_sweep FILE NAME STEPS SEEDS [ROPES]: the test sweep of tiny jobs,
# one per seed and rope (ROPES: default "rope, bifocal"); sets JOBS.
LOG_EVERY=10
write_sweep() {
    local file=$1 name=$2 ropes=${5:-rope, bifocal}
    STEPS=$3
    JOBS=$(($4 * $(tr ',' '\n' <<<"$ropes" | wc -l)))
    cat > "$file" <<YAML
name: $name
base: {task: dyck, depth: 2, eval_depths: [2, 4], d_model: 16, n_layers: 1,
       n_heads: 2, seq_len: 24, batch_size: 8, steps: $STEPS, warmup_steps: 5,
       lr: 0.0003, log_every: $LOG_EVERY, eval_every: 0, freq_every: 0,
       checkpoint_every: 20, eval_examples: 8}
grid:
  rope: [$ropes]
  seed: [$(seq -s, 1 "$4")]
max_attempts: 3
YAML
}

# start_sweep DB LEASE NAME STEPS SEEDS [ROPES]: a fresh coordinator on h1
# with the test sweep (write_sweep) submitted.
start_sweep() {
    local db=$1
    start_daemon "$db" "$2"
    write_sweep "$WORK/sweep.yaml" "$3" "$4" "$5" ${6:+"$6"}
    client "$db" submit "$WORK/sweep.yaml" > /dev/null || fail "submit failed"
}
