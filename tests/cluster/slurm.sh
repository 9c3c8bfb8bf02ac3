# The Slurm scenario of tests/cluster/run.sh (sourced after lib.sh): a real
# controller (slurmctld on h1, beside the coordinator, as on a login node)
# and a node daemon (slurmd) on each of h2, h3, h4, authenticated by one
# munged (its socket is on the file system every test host shares, as
# each node's own munged would share the key).  Workers are submitted with
# sbatch from h1, as users do: configs/slurm-workers.sbatch.

SLURM_DIR="$WORK/slurm"
# Longer than any wait for the time-limit signal: slurmctld checks time
# limits every 30 s, so TERM@55 of a 1-minute limit comes 5 to 35 s after
# the start (and later on a loaded machine).  The job is cancelled once
# resumed.
LIMIT_STEPS=1000000
SBATCH_SCRIPT="$ROOT/configs/slurm-workers.sbatch"
MUNGED_PID=""
declare -a SLURM_PIDS=()

write_slurm_conf() {
    mkdir -p "$SLURM_DIR/state" "$SLURM_DIR"/spool-h{2,3,4}
    cat > "$SLURM_DIR/slurm.conf" <<EOF
ClusterName=bifocaltest
SlurmctldHost=h1(10.213.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/socket
CredType=cred/munge
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool-%n
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd-%n.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=10
InactiveLimit=0
NodeName=h[2-4] NodeAddr=10.213.0.[2-4] CPUs=2 State=UNKNOWN
PartitionName=test Nodes=h[2-4] Default=YES MaxTime=INFINITE State=UP
EOF
}

# A munge key of our own, and munged on a socket of our own.  The socket is
# a file: every test host reaches it.
start_munged() {
    mkdir -p "$WORK/munge"
    chmod 755 "$WORK" "$WORK/munge"    # munged wants the socket reachable by all
    dd if=/dev/urandom of="$WORK/munge/key" bs=128 count=1 status=none
    chmod 400 "$WORK/munge/key"
    # On h1, so that removing the hosts ends it whatever happens.
    "$HOSTS" exec "$CLUSTER" h1 munged --foreground --socket="$WORK/munge/socket" \
        --key-file="$WORK/munge/key" --pid-file="$WORK/munge/pid" \
        --log-file="$WORK/munge/log" --seed-file="$WORK/munge/seed" \
        2> "$WORK/munge/stderr" &
    MUNGED_PID=$!
    local _
    for _ in $(seq 50); do
        [ -S "$WORK/munge/socket" ] && return 0
        sleep 0.1
    done
    fail "munged did not start (log: $(tail -n 3 "$WORK/munge/log" 2>/dev/null))"
}

# The shell commands that give a node a /tmp of its own (Open MPI's session
# directories are named by host name, which the test hosts share) while a
# checkout or build under /tmp (a fresh `git clone` into `mktemp -d`) stays
# visible there: the machine's /tmp is bound aside, the node's tmpfs
# mounted over /tmp, and the checkout's top folder bound back into it.
node_tmp_mounts() {
    local tops d
    tops=$(for d in "$ROOT" "$BUILD"; do
               case $d in /tmp/?*) d=${d#/tmp/}; echo "/tmp/${d%%/*}" ;; esac
           done | sort -u)
    if [ -z "$tops" ]; then
        echo "mount -t tmpfs node_tmp /tmp"
        return
    fi
    printf 'mkdir -p %s/host-tmp && mount --bind /tmp %s/host-tmp && mount -t tmpfs node_tmp /tmp' "$WORK" "$WORK"
    for d in $tops; do
        printf ' && mkdir -p %s && mount --bind %s/host-tmp/%s %s' "$d" "$WORK" "${d#/tmp/}" "$d"
    done
    echo
}

slurm_up() {
    export SLURM_CONF="$SLURM_DIR/slurm.conf"
    write_slurm_conf
    start_munged
    "$HOSTS" exec "$CLUSTER" h1 slurmctld -D -f "$SLURM_CONF" \
        > "$SLURM_DIR/slurmctld.out" 2>&1 &
    SLURM_PIDS+=($!)
    local h
    for h in h2 h3 h4; do
        # `ip netns exec` remounts /sys, so the host's cgroup mounts are not
        # there; slurmd insists on finding a cgroup file system.  A tmpfs
        # in this host's private mount namespace is the empty cgroup v1
        # root it then finds (proctrack/pgid and task/none use no
        # controller).
        "$HOSTS" exec "$CLUSTER" "$h" sh -c \
            "$(node_tmp_mounts) && mount -t tmpfs cgroup_root /sys/fs/cgroup && mkdir /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd && exec \"\$@\"" slurmd \
            slurmd -D -f "$SLURM_CONF" \
            > "$SLURM_DIR/slurmd-$h.out" 2>&1 &
        SLURM_PIDS+=($!)
    done
    local _
    for _ in $(seq 150); do
        [ "$(on_host h1 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" = 3 ] \
            && return 0
        sleep 0.2
    done
    on_host h1 sinfo -N >&2 || true
    tail -n 5 "$SLURM_DIR"/*.log >&2 || true
    fail "the 3 Slurm nodes did not come up idle within 30 s"
}

slurm_down() {
    local p
    for p in "${SLURM_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${SLURM_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    SLURM_PIDS=()
    if [ -n "$MUNGED_PID" ]; then
        kill -TERM "$MUNGED_PID" 2>/dev/null || true
        wait "$MUNGED_PID" 2>/dev/null || true
        MUNGED_PID=""
    fi
}

# sbatch ARGS...: submits configs/slurm-workers.sbatch from h1 with the
# test's coordinator, token and checkpoint directory; prints the job id.
submit_workers() {
    local db=$1; shift
    on_host h1 env BIFOCAL_SERVER="$COORD" BIFOCAL_TOKEN_FILE="$db.token" \
        BIFOCAL_CKPT_DIR="$WORK/ckpt" BIFOCAL_WORKER="$WORKER" \
        OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include="$SUBNET" \
        OMPI_MCA_oob_tcp_if_include="$SUBNET" \
        sbatch --parsable --chdir="$SLURM_DIR" --nodes=2 --ntasks-per-node=1 \
            "$@" "$SBATCH_SCRIPT"
}

squeue_count() { on_host h1 squeue -h -o %i | wc -l; }

# wait_slurm_empty SECONDS: until no Slurm job is pending or running.
wait_slurm_empty() {
    local _
    for _ in $(seq $(($1 * 2))); do
        [ "$(on_host h1 squeue -h -o %i | wc -l)" = 0 ] && return 0
        sleep 0.5
    done
    fail "Slurm jobs still queued after $1 s: $(on_host h1 squeue -h -o '%i %T %M' | xargs)"
}

# rank_signalled PID: PID holds a SIGTERM (bit 15 of its ShdPnd), runs
# again (slurmstepd may send SIGCONT first), or is gone.
rank_signalled() {
    local status
    status=$(cat "/proc/$1/status" 2>/dev/null) || return 0
    grep -q $'^State:\tT' <<<"$status" || return 0
    (( 0x$(sed -n 's/^ShdPnd:\t//p' <<<"$status") & 0x4000 ))
}

# wait_term_pending SECONDS PID...: until every frozen rank PID is
# signalled (rank_signalled).
wait_term_pending() {
    local limit=$1 p _; shift
    for p in "$@"; do
        for _ in $(seq $((limit * 10))); do
            rank_signalled "$p" && continue 2
            sleep 0.1
        done
        fail "frozen rank $p got no SIGTERM within $limit s of scancel"
    done
}

# expect_resumed_after_signal DB JOB STOPPED_BY RESUMED_BY [OUTCOME]: JOB's
# first attempt was stopped by SIGTERM on STOPPED_BY, which wrote a
# checkpoint there, and RESUMED_BY resumed from exactly that checkpoint
# (its attempt ended OUTCOME, default succeeded); sets SIGNAL_STEP.
expect_resumed_after_signal() {
    local db=$1 job=$2 stopped=$3 resumed=$4 outcome=${5:-succeeded} step
    expect "$db" "job $job: stopped on $stopped, then $outcome on $resumed" \
        "SELECT group_concat(worker || ':' || outcome) FROM
           (SELECT * FROM attempts WHERE job_id = $job ORDER BY attempt_no)" \
        "$stopped:failed,$resumed:$outcome"
    step=$(sql "$db" "SELECT error FROM attempts WHERE job_id = $job AND attempt_no = 1" |
           sed -n 's/^worker stopped by a signal at step \([0-9]*\)$/\1/p')
    [ -n "$step" ] || fail "job $job's first attempt did not end on a signal"
    grep -q "job $job: resuming from $WORK/ckpt/db-[0-9a-f]*/job-$job/step-$(printf %06d "$step").safetensors" \
        "$SLURM_DIR"/bifocal-workers-*.out \
        || fail "job $job was not resumed from the checkpoint of step $step written on the signal"
    log "ok: job $job: SIGTERM at step $step, checkpoint, resumed there by $resumed"
    SIGNAL_STEP=$step
}

# Slurm: a job array of two groups, each spanning two nodes, runs a sweep;
# scancel of one array task mid-job makes its group checkpoint and the
# other task resume the job.  Then a group whose time limit comes first
# gets --signal=TERM@N, checkpoints, and a group submitted later (idle,
# every job leased elsewhere: the grace period keeps it) resumes the job.
scenario_slurm() {
    slurm_up
    log "slurmctld on h1, slurmd on h2 h3 h4: 3 nodes idle"
    local db="$WORK/slurm.db"
    start_sweep "$db" 30 slurm 8000 1
    local array job task
    array=$(submit_workers "$db" --array=0-1 --export=ALL,BIFOCAL_IDLE_GRACE=3) \
        || fail "sbatch refused the array"
    log "sbatch --array=0-1: job $array"
    # Both array tasks have connected (the second may start seconds later).
    wait_sql "$db" "SELECT count(*) = 2 FROM workers" 90
    wait_sql "$db" "SELECT count(*) > 0 FROM jobs WHERE status = 'running'
                      AND checkpoint_step >= 40" 60
    # A job trains in seconds here, and scancel takes about a second to
    # reach the ranks: the ranks are frozen (SIGSTOP) first, so that the
    # job chosen cannot end before the signal reaches it.
    local ranks stopped
    ranks=$(worker_ranks "slurm-${array}_0" "slurm-${array}_1")
    # shellcheck disable=SC2086
    kill -STOP $ranks
    sleep 0.5    # what the ranks sent before the freeze reaches the database
    job=$(sql "$db" "SELECT min(job_id) FROM jobs WHERE status = 'running' AND checkpoint_step >= 40")
    [ -n "$job" ] || fail "no job was left running at step 40 or later when the ranks were frozen"
    task=$(sql "$db" "SELECT worker FROM attempts WHERE job_id = $job AND outcome = 'running'")
    task=${task#slurm-}
    stopped=$(worker_ranks "slurm-$task")
    [ "$(wc -w <<<"$stopped")" = 2 ] \
        || fail "group slurm-$task runs $(wc -w <<<"$stopped") bifocal-worker ranks, expected 2"
    # shellcheck disable=SC2046
    kill -CONT $(grep -vxF "$stopped" <<<"$ranks") 2>/dev/null || true
    on_host h1 scancel "$task" || fail "scancel $task failed"
    log "scancel $task (training job $job, its ranks frozen at step $(sql "$db" \
        "SELECT checkpoint_step FROM jobs WHERE job_id = $job") or later)"
    # shellcheck disable=SC2086
    wait_term_pending 30 $stopped
    # shellcheck disable=SC2086
    kill -CONT $stopped 2>/dev/null || true
    wait_slurm_empty 120
    local other=$(( 1 - ${task#*_} ))
    expect_resumed_after_signal "$db" "$job" "slurm-$task" "slurm-${array}_$other"
    expect_complete "$db" "$JOBS" $((SIGNAL_STEP % LOG_EVERY != 0))

    stop_daemon

    # The time limit: TERM@55 of a 1-minute limit (LIMIT_STEPS says when
    # it comes).
    db="$WORK/slurm-limit.db"
    start_sweep "$db" 30 limit "$LIMIT_STEPS" 1 bifocal
    local limited late t0=$SECONDS
    limited=$(submit_workers "$db" --time=1 --signal=TERM@55 \
        --export=ALL,BIFOCAL_IDLE_GRACE=3) || fail "sbatch --signal refused"
    wait_sql "$db" "SELECT count(*) = 1 FROM attempts" 60
    # Every job is leased: without the grace period this group would exit.
    late=$(submit_workers "$db" --export=ALL,BIFOCAL_IDLE_GRACE=120) \
        || fail "sbatch refused the second group"
    log "sbatch --time=1 --signal=TERM@55: job $limited, then job $late"
    wait_sql "$db" "SELECT count(*) = 1 FROM attempts WHERE outcome = 'failed'" 90
    log "the time-limit signal came $((SECONDS - t0)) s after the submit"
    # The late group resumed it and has stored steps past the signal's.
    local stop_step
    stop_step=$(sql "$db" "SELECT error FROM attempts WHERE outcome = 'failed'" | grep -o '[0-9]*$')
    wait_sql "$db" "SELECT max(step) > ${stop_step:-0} + 100 FROM metrics WHERE key = 'loss'" 60
    client "$db" cancel 1 > /dev/null || fail "bifocal cancel failed"
    wait_sql "$db" "SELECT count(*) = 1 FROM jobs WHERE status = 'cancelled'" 60
    on_host h1 scancel "$late"
    wait_slurm_empty 60
    stop_daemon
    expect_resumed_after_signal "$db" 1 "slurm-$limited" "slurm-$late" cancelled
    # Nothing lost or doubled across the two attempts: every logged step up
    # to the last one stored is there once.
    expect "$db" "every logged step up to the last stored once" \
        "SELECT count(*) = max(step) / $LOG_EVERY FROM metrics
         WHERE key = 'loss' AND step % $LOG_EVERY = 0" 1
}
