# The four multi-host scenarios of tests/cluster/run.sh (sourced after
# lib.sh).  Hosts: h1 runs the coordinator; group A is launched on h2 with
# one rank on h2 and one on h3; group B is launched on h4 with one rank on
# h4 and one on h2.  Every group reaches the coordinator at h1:7070 over
# the test network.

GROUP_A="h2:1 h3:1"
GROUP_B="h4:1 h2:1"
# Groups exit 3 s after the queue runs dry (the jobs of a sweep finish at
# different times on different groups).
IDLE=(--exit-when-idle --idle-grace 3)

# wait_both_training DB: both jobs running, each with records stored.
wait_both_training() {
    wait_sql "$1" "SELECT count(*) = 2 FROM jobs j WHERE status = 'running'
                     AND (SELECT count(*) FROM metrics m WHERE m.job_id = j.job_id) >= 5" 60
}

start_both_groups() {
    local db=$1
    start_group gA "$db" h2 "$GROUP_A" "${IDLE[@]}"
    start_group gB "$db" h4 "$GROUP_B" "${IDLE[@]}"
}

wait_both_groups() {
    local limit=$1
    wait_group gA "$limit"; [ "$GROUP_RC" = 0 ] || fail "group A exited $GROUP_RC"
    wait_group gB "$limit"; [ "$GROUP_RC" = 0 ] || fail "group B exited $GROUP_RC"
}

# run_sweep_on_one_group DB STEPS LAUNCH PLACES: scenario 1's sweep on one
# group, to the end.
run_sweep_on_one_group() {
    local db=$1 steps=$2 launch=$3 places=$4
    start_sweep "$db" 30 four "$steps" 2
    start_group ref "$db" "$launch" "$places" "${IDLE[@]}"
    wait_group ref 120; [ "$GROUP_RC" = 0 ] || fail "reference group exited $GROUP_RC"
    stop_daemon
}

# differing DB OTHER_DB TOLERANCE: training metrics (all but the timing
# tokens_per_s) and evaluations of DB whose value in OTHER_DB differs by
# more than TOLERANCE (relative), or is missing.  Job ids match: both
# databases got the same sweep as their first.
differing() {
    sql "$1" "ATTACH '$2' AS o;
        SELECT (SELECT count(*) FROM metrics m LEFT JOIN o.metrics r
                  ON r.job_id = m.job_id AND r.key = m.key AND r.step = m.step
                WHERE m.key != 'tokens_per_s' AND (r.value IS NULL
                  OR abs(m.value - r.value) > $3 * abs(r.value)))
             + (SELECT count(*) FROM evals e LEFT JOIN o.evals r
                  ON r.job_id = e.job_id AND r.step = e.step AND r.depth = e.depth
                WHERE r.loss IS NULL OR abs(e.loss - r.loss) > $3 * abs(r.loss)
                  OR abs(e.accuracy - r.accuracy) > $3 * abs(r.accuracy))"
}

# 1. A sweep on two groups that each span two hosts ends with the results
#    of the same sweep on one host: placement and rank count change nothing
#    (2 ranks on one host: bit for bit; 1 rank: up to float rounding).
scenario_1() {
    local db="$WORK/s1.db" steps=100
    start_sweep "$db" 30 four "$steps" 2
    start_both_groups "$db"
    wait_both_groups 120
    stop_daemon
    expect_complete "$db" "$JOBS"
    expect "$db" "both groups trained jobs" \
        "SELECT count(DISTINCT worker) FROM attempts" 2
    expect "$db" "one attempt per job" "SELECT count(*) FROM attempts" "$JOBS"
    expect "$db" "each group has 2 ranks, rank 0 on h2 and on h4" \
        "SELECT group_concat(name || '@' || host || 'x' || ranks) FROM
           (SELECT * FROM workers ORDER BY name)" "gA@h2x2,gB@h4x2"

    run_sweep_on_one_group "$WORK/s1-one-host.db" "$steps" h3 "h3:2"
    [ "$(differing "$db" "$WORK/s1-one-host.db" 0)" = 0 ] \
        || fail "2 ranks on one host stored other values than 2 ranks on two hosts"
    log "ok: 2 ranks on h3 alone: every metric equal, bit for bit"
    run_sweep_on_one_group "$WORK/s1-one-rank.db" "$steps" h3 "h3:1"
    [ "$(differing "$db" "$WORK/s1-one-rank.db" 1e-4)" = 0 ] \
        || fail "1 rank stored values more than 1e-4 away from 2 ranks on two hosts"
    log "ok: 1 rank on h3: every metric within 1e-4 (relative)"
}

# 2. h3 is cut off while group A (h2 + h3) trains a job.  The OOB
#    keep-alive (lib.sh: 3 s idle + 2 probes 1 s apart) makes mpirun on h2
#    and the orted on h3 give up on each other: both take their ranks down.
#    The dead group's lease (8 s) expires, and group B (h4 + h2) resumes the
#    job from its checkpoint and finishes it.
scenario_2() {
    local db="$WORK/s2.db" lease=8
    start_sweep "$db" "$lease" cut 1200 1
    start_group gA "$db" h2 "$GROUP_A" "${IDLE[@]}"
    # Group A has a checkpoint of its job recorded: then B joins.
    wait_sql "$db" "SELECT count(*) = 1 FROM jobs j JOIN attempts a USING (job_id)
                    WHERE a.worker = 'gA' AND a.outcome = 'running'
                      AND j.checkpoint_step >= 40" 60
    # Frozen (SIGSTOP) until the cut, group A's job cannot end before it
    # (it trains in about a second).
    local job ranks
    ranks=$(worker_ranks gA)
    [ "$(wc -w <<<"$ranks")" = 2 ] || fail "group A runs $(wc -w <<<"$ranks") ranks, expected 2"
    # shellcheck disable=SC2086
    kill -STOP $ranks
    job=$(sql "$db" "SELECT job_id FROM attempts WHERE worker = 'gA' AND outcome = 'running'")
    # B's grace outlasts A's lease: B must still be there when A's job
    # comes back.  It is stopped once the sweep is done.
    start_group gB "$db" h4 "$GROUP_B" --exit-when-idle --idle-grace 60
    local ckpt_step
    ckpt_step=$(sql "$db" "SELECT checkpoint_step FROM jobs WHERE job_id = $job")
    "$HOSTS" cut "$CLUSTER" h3
    # shellcheck disable=SC2086
    kill -CONT $ranks
    log "h3 cut off while group A trains job $job"
    local t0=$SECONDS
    wait_group gA 30
    [ "$GROUP_RC" != 0 ] || fail "group A exited 0 after losing h3"
    log "ok: group A's mpirun exited $GROUP_RC after $((SECONDS - t0)) s"
    local _
    for _ in $(seq 100); do
        [ -z "$(ip netns pids "$CLUSTER-h3")" ] && break
        sleep 0.1
    done
    [ -z "$(ip netns pids "$CLUSTER-h3")" ] \
        || fail "processes still running on h3 $((SECONDS - t0)) s after the cut: $(ip netns pids "$CLUSTER-h3" | xargs)"
    log "ok: nothing left running on h3 after $((SECONDS - t0)) s"
    "$HOSTS" join "$CLUSTER" h3
    wait_sql "$db" "SELECT count(*) = $JOBS FROM jobs WHERE status = 'succeeded'" 120
    kill -TERM "${GROUP_PID[gB]}"
    # mpirun itself exits 1 when signalled; the group's own word counts.
    wait_group gB 30
    grep -q "stopping on signal 15" "$WORK/gB.log" || fail "group B did not stop cleanly on SIGTERM"
    stop_daemon
    expect_complete "$db" "$JOBS"
    expect "$db" "job $job: first attempt expired on A, second succeeded on B" \
        "SELECT group_concat(worker || ':' || outcome) FROM
           (SELECT * FROM attempts WHERE job_id = $job ORDER BY attempt_no)" \
        "gA:expired,gB:succeeded"
    local resumed
    resumed=$(sed -n "s|.*job $job: resuming from $WORK/ckpt/db-[0-9a-f]*/job-$job/step-0*\([0-9]*\)\.safetensors$|\1|p" \
        "$WORK/gB.log")
    [ -n "$resumed" ] && [ "$resumed" -ge "$ckpt_step" ] && [ "$resumed" -lt "$STEPS" ] \
        || fail "group B did not resume job $job from a checkpoint at or after step $ckpt_step (log: '$resumed')"
    log "ok: group B resumed job $job from its checkpoint of step $resumed"
}

# 3. h1 (the coordinator's host) is cut off for 8 to 12 s: longer than
#    the heartbeat (lease / 3 = 7 s), shorter than the lease (21 s) minus a
#    heartbeat, so no lease can expire.  Both groups keep training; once h1
#    is back, TCP delivers what they sent meanwhile, and every record is
#    stored once, on the first attempt.
scenario_3() {
    local db="$WORK/s3.db" lease=21
    start_sweep "$db" "$lease" partition 2000 1
    start_both_groups "$db"
    wait_both_training "$db"
    "$HOSTS" cut "$CLUSTER" h1
    local t0=$EPOCHREALTIME before after
    log "h1 cut off"
    sleep 1
    before=$(sql "$db" "SELECT count(*) FROM metrics")
    # 8 s after the cut, whatever the queries took.
    sleep "$(awk -v t0="$t0" -v now="$EPOCHREALTIME" \
        'BEGIN { d = t0 + 8 - now; print (d > 0 ? d : 0) }')"
    after=$(sql "$db" "SELECT count(*) FROM metrics")
    "$HOSTS" join "$CLUSTER" h1
    local cut
    cut=$(awk -v t0="$t0" -v now="$EPOCHREALTIME" 'BEGIN { printf "%d", now - t0 }')
    log "h1 back after $cut s"
    [ "$cut" -ge 8 ] && [ "$cut" -le 12 ] \
        || fail "the cut lasted $cut s, outside 8..12 s (machine too loaded?)"
    [ "$before" = "$after" ] \
        || fail "metrics arrived while h1 was cut off ($before -> $after): the cut did not cut"
    log "ok: nothing arrived during the cut ($after metrics rows)"
    wait_both_groups 120
    stop_daemon
    expect_complete "$db" "$JOBS"
    expect "$db" "one attempt per job, none expired" \
        "SELECT group_concat(job_id || ':' || outcome) FROM
           (SELECT * FROM attempts ORDER BY job_id, attempt_no)" \
        "1:succeeded,2:succeeded"
}

# 4. The coordinator is killed (SIGKILL) and restarted on h1 while both
#    groups train: they reconnect, send again what was not acknowledged,
#    and the sweep ends with every record stored once.
scenario_4() {
    local db="$WORK/s4.db"
    start_sweep "$db" 30 restart 400 1
    start_both_groups "$db"
    wait_both_training "$db"
    kill -KILL "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null || true
    log "bifocald killed"
    sleep 2
    start_daemon "$db" 30
    log "bifocald restarted on h1"
    wait_both_groups 120
    stop_daemon
    expect_complete "$db" "$JOBS"
    expect "$db" "one attempt per job: the restart lost no lease" \
        "SELECT count(*) FROM attempts WHERE outcome = 'succeeded'" "$JOBS"
    grep -q "lost the coordinator" "$WORK/gA.log" "$WORK/gB.log" \
        || fail "no group noticed the coordinator going away"
    log "ok: the groups reconnected"
}
