# Study 2 (issue 20, research/study.md): sourced by scripts/study.sh, which
# sets $bifocal (the client).  Three sweeps in one database: 1
# configs/study-frequency.yaml (dyck, counter, surgery, modarith tune), 2
# configs/study-frequency-code.yaml, 3 configs/study-frequency-scale.yaml
# with the encodings the first two chose.

# study_frequency [run|analyse]
study_frequency() {
    case "${1:-run}" in
        run|analyse) ;;
        *) echo "usage: scripts/study.sh frequency [run|analyse]" >&2; return 2 ;;
    esac
    bf_install_pkgs python3-yaml sqlite3 jq
    local db=${STUDY_DB:-runs/study-frequency.db}
    local out=${STUDY_OUT:-research/study/frequency}
    local work=$db.sweeps
    mkdir -p "$(dirname "$db")" "$out" "$work"
    if [ "${1:-run}" = run ]; then
        rm -rf "$db" "$db"-wal "$db"-shm "$db".checkpoints "$db".log
        local start=$SECONDS
        study__run "$db" "$work" study-frequency
        study__run "$db" "$work" study-frequency-code
        study__scale_choice "$db" > "$work/scale-choice.json"
        study__run "$db" "$work" study-frequency-scale \
            --choice "$work/scale-choice.json"
        echo "the study took $(( (SECONDS - start) / 60 )) min" \
             "$(( (SECONDS - start) % 60 )) s"
    fi
    study__analyse "$db" "$out"
}

# study__run DB WORK NAME [--choice FILE]: the sweep file configs/NAME.yaml
# (at smoke scale under STUDY_SMOKE=1) run to its end.
study__run() {
    local db=$1 work=$2 name=$3; shift 3
    local smoke=()
    [ -n "${STUDY_SMOKE:-}" ] && smoke=(--smoke)
    python3 scripts/study_sweep.py "configs/$name.yaml" "$work/$name.json" \
        "$@" "${smoke[@]}"
    "$bifocal" run "$work/$name.json" --db "$db" --groups 2 --ranks 1 \
        --no-dashboard
}

# The confirm cells of each task the scale check runs on, ranked by the
# geometric mean over seeds of their in-distribution (depth 4) eval loss:
# no test depth is looked at.  Rank 0 is the baseline; 1 and 2 are chosen.
study__ranking_sql="
  WITH cells AS (
    SELECT j.sweep_id, j.task, j.rope,
           json_extract(j.config, '\$.rope_base') AS rope_base,
           json_extract(j.config, '\$.random_positions') AS random_positions,
           json_extract(j.config, '\$.lr') AS lr,
           json_extract(j.config, '\$.freq_lr_mult') AS freq_lr_mult,
           count(*) AS seeds, exp(avg(ln(f.loss))) AS depth4_loss
      FROM final_evals f JOIN jobs j USING (job_id)
     WHERE j.stage = 'confirm' AND f.eval_depth = 4
       AND ((j.sweep_id = 1 AND j.task = 'dyck')
         OR (j.sweep_id = 2 AND j.task = 'code'))
     GROUP BY 1, 2, 3, 4, 5, 6, 7)
  SELECT *, row_number() OVER (PARTITION BY sweep_id ORDER BY
              rope = 'rope' AND rope_base = 1e4 AND random_positions = 0
              DESC, depth4_loss) - 1 AS rank
    FROM cells"

# study__scale_choice DB: the scale check's zips as JSON, per stage: the
# baseline and the two best of the ranking.
study__scale_choice() {
    sqlite3 "$1" "
      SELECT json_group_object(stage, json(encodings)) FROM (
        SELECT 'scale-' || task AS stage,
               json_group_array(json_object('rope', rope,
                 'rope_base', rope_base, 'random_positions',
                 random_positions, 'lr', lr,
                 'freq_lr_mult', freq_lr_mult)) AS encodings
          FROM (SELECT * FROM ($study__ranking_sql)
                 WHERE rank <= 2 ORDER BY sweep_id, rank)
         GROUP BY task ORDER BY task)"
}

# study__analyse DB OUT: the compact database, the reports and the tables.
study__analyse() {
    local db=$1 out=$2
    local slim=$out/study.db
    study_slim "$db" "$slim"
    local sweep
    # The reports from the whole database, for their training curves and
    # frequency trajectories (the compact copy keeps their ends only).
    for sweep in 1 2 3; do
        "$bifocal" report "$sweep" --db "$db" -o "$out/report-$sweep.html"
    done
    study_headline "$slim" > "$out/headline.txt"
    cat "$out/headline.txt"
    sqlite3 -header -column "$slim" \
        "SELECT * FROM ($study__ranking_sql) ORDER BY sweep_id, rank" \
        > "$out/scale-choice.txt"
    # Modular arithmetic: the best exact match fixed RoPE reached in
    # distribution (the issue runs it on only if it is >= 0.9): each
    # trial's last evaluation at depth 4, a pruned one's at its last rung.
    sqlite3 -header -column "$slim" "
      SELECT j.job_id, printf('%.3g', json_extract(j.config, '\$.lr')) AS lr,
             j.status, e.step, printf('%.4f', e.loss) AS loss,
             printf('%.3f', e.accuracy) AS accuracy
        FROM jobs j JOIN evals e ON e.job_id = j.job_id AND e.depth = 4
       WHERE j.sweep_id = 1 AND j.stage = 'modarith'
         AND e.step = (SELECT max(step) FROM evals l
                        WHERE l.job_id = j.job_id AND l.depth = 4)
       ORDER BY e.accuracy DESC, j.job_id" > "$out/modarith.txt"
    # What each stage cost: its jobs by outcome, the steps they trained,
    # its wall time (first start to last end: stages of a sweep overlap
    # where their jobs do not wait on each other) and job time (the sum
    # over its jobs, each on one group of 1 rank); then each sweep whole.
    sqlite3 -header -column "$slim" "
      WITH costs AS (
        SELECT sweep_id, stage, status, started_ms, finished_ms,
               (SELECT max(step) FROM metrics m
                 WHERE m.job_id = j.job_id) AS steps
          FROM jobs j),
      parts AS (
        SELECT sweep_id, stage, min(rowid) AS o FROM jobs GROUP BY 1, 2
        UNION ALL SELECT sweep_id, NULL, max(rowid) + 0.5 FROM jobs GROUP BY 1
        UNION ALL SELECT NULL, NULL, 1e18)
      SELECT coalesce(p.sweep_id, 'all') AS sweep,
             coalesce(p.stage, '(all)') AS stage, count(*) AS jobs,
             sum(c.status = 'succeeded') AS succeeded,
             sum(c.status = 'pruned') AS pruned,
             sum(c.status = 'cancelled') AS cancelled,
             sum(c.status = 'failed') AS failed, sum(c.steps) AS steps,
             round((max(c.finished_ms) - min(c.started_ms)) / 60000.0, 1)
               AS wall_min,
             round(sum(c.finished_ms - c.started_ms) / 60000.0, 1) AS job_min
        FROM parts p JOIN costs c
          ON (p.sweep_id IS NULL OR c.sweep_id = p.sweep_id)
         AND (p.stage IS NULL OR c.stage = p.stage)
       GROUP BY p.sweep_id, p.stage, p.o ORDER BY p.o" > "$out/cost.txt"
    cat "$out/cost.txt" "$out/scale-choice.txt" "$out/modarith.txt"
    study__tables "$slim" "$out"
    study__figures "$db" "$out"
}

# study__figures DB OUT: the figures research/findings.md shows, as PNG files
# drawn by the reports of the confirm and scale stages themselves
# (scripts/report_png.js, headless chromium): exact match and loss against
# depth, training loss, and for the confirm stages how spectral's and
# bifocal's frequencies moved.  From the study's whole database: the
# compact one keeps only each job's first and last frequencies and last
# training loss, too little for the curves.
study__figures() {
    local db=$1 out=$2 stage cell sweep task
    local html; html=$(mktemp -d /tmp/study-figures.XXXXXX)
    scripts/browser-deps.sh
    for cell in $study__confirms; do
        sweep=${cell%%:*} task=${cell#*:}
        "$bifocal" report "$sweep" --db "$db" \
            --where "stage=confirm,task=$task" \
            --by "$(study__encoding "$db" "$sweep" confirm)" \
            -o "$html/confirm-$task.html"
        node scripts/report_png.js "$html/confirm-$task.html" \
            "$out/confirm-$task" \
            "rope=spectral rope_base=10000 random_positions=0" \
            "rope=bifocal rope_base=10000 random_positions=0"
    done
    for stage in $(study__scale_stages "$db"); do
        "$bifocal" report 3 --db "$db" --where "stage=$stage" \
            --by "$(study__encoding "$db" 3 "$stage")" -o "$html/$stage.html"
        node scripts/report_png.js "$html/$stage.html" "$out/$stage"
    done
    rm -rf "$html"
}

# study__tables DB OUT: what research/findings.md quotes, each file the output
# of one command on the compact database: compare of each confirm,
# surgery and scale cell set (every depth, every verdict line), the values
# each tune chose, the seed decisions and how far the frequencies moved.
study__tables() {
    local db=$1 out=$2 task stage cell sweep
    for cell in $study__confirms; do
        sweep=${cell%%:*} task=${cell#*:}
        "$bifocal" compare "$sweep" --db "$db" --verbose \
            --where "stage=confirm,task=$task" \
            --by "$(study__encoding "$db" "$sweep" confirm)" \
            > "$out/confirm-$task.txt"
    done
    for task in dyck counter; do
        "$bifocal" compare 1 --db "$db" --verbose \
            --where "stage=surgery,task=$task" \
            --by "$(study__encoding "$db" 1 surgery)" \
            > "$out/surgery-$task.txt"
    done
    for stage in $(study__scale_stages "$db"); do
        "$bifocal" compare 3 --db "$db" --verbose --where "stage=$stage" \
            --by "$(study__encoding "$db" 3 "$stage")" > "$out/$stage.txt"
    done
    sqlite3 -header -column "$db" "$study__tuned_sql" > "$out/tuned.txt"
    sqlite3 -header -column "$db" "$study__seeds_sql" > "$out/seeds.txt"
    sqlite3 -header -column "$db" "$study_frequencies_sql" \
        > "$out/frequencies.txt"
}

# The confirm stages, as SWEEP:TASK: each has its tables and figures.
study__confirms="1:dyck 1:counter 2:code"

# study__encoding DB SWEEP STAGE: the encoding fields (rope, rope_base,
# random_positions) that vary among the stage's jobs, comma-separated: the
# groups of its comparisons (lr and freq_lr_mult, tuned per encoding, are
# not grouping fields), named as compare's --by wants them.
study__encoding() {
    sqlite3 "$1" "
      SELECT group_concat(field, ',') FROM (
        SELECT 'rope' AS field, count(DISTINCT rope) AS n FROM jobs
         WHERE sweep_id = $2 AND stage = '$3'
        UNION ALL
        SELECT 'rope_base', count(DISTINCT json_extract(config, '\$.rope_base'))
          FROM jobs WHERE sweep_id = $2 AND stage = '$3'
        UNION ALL
        SELECT 'random_positions',
               count(DISTINCT json_extract(config, '\$.random_positions'))
          FROM jobs WHERE sweep_id = $2 AND stage = '$3')
       WHERE n > 1"
}

# The scale check's stages (scale-code, scale-dyck).
study__scale_stages() {
    sqlite3 "$1" "SELECT DISTINCT stage FROM jobs WHERE sweep_id = 3
                   ORDER BY stage"
}

# Each tune cell's chosen trial: its values and in-distribution loss, out
# of how many trials and how many of them ran to the end.
study__tuned_sql="
  SELECT s.sweep_id AS sweep, s.stage, j.task, j.rope,
         json_extract(j.config, '\$.rope_base') AS rope_base,
         json_extract(j.config, '\$.random_positions') AS random_positions,
         printf('%.3g', json_extract(j.config, '\$.lr')) AS lr,
         CASE WHEN j.rope IN ('spectral', 'bifocal')
              THEN printf('%.3g', json_extract(j.config, '\$.freq_lr_mult'))
              ELSE '-' END AS freq_lr_mult,
         s.trial, printf('%.4g', s.value) AS depth4_loss,
         (SELECT count(*) FROM trials t
           WHERE t.select_id = s.select_id AND t.grp = s.grp) AS trials,
         (SELECT count(*) FROM selections r
           WHERE r.select_id = s.select_id AND r.grp = s.grp) AS finished
    FROM trial_selections s JOIN jobs j USING (job_id)
   WHERE s.chosen ORDER BY s.sweep_id, s.stage, s.grp"

# Each adaptive comparison: its end, the seeds it spent and the confidence
# sequence's interval of the loss ratio at its last look.
study__seeds_sql="
  SELECT c.sweep_id AS sweep, c.stage, v.task, v.rope,
         json_extract(v.config, '\$.rope_base') AS rope_base,
         json_extract(v.config, '\$.random_positions') AS random_positions,
         c.eval_depth, c.state, c.decided_seed, c.released, c.n_pairs,
         CASE WHEN c.ci_low IS NULL THEN '0'
              ELSE printf('%.3g', exp(c.ci_low)) END AS ratio_low,
         CASE WHEN c.ci_high IS NULL THEN 'inf'
              ELSE printf('%.3g', exp(c.ci_high)) END AS ratio_high
    FROM seed_comparisons c
    JOIN jobs v ON v.sweep_id = c.sweep_id AND v.cell = c.variant_cell
               AND v.seed = 1
   ORDER BY c.sweep_id, v.task, c.variant_cell"

# study_headline DB: the primary family of each sweep that declares
# adaptive seeds (its confirm stage: the loss at the deepest depth), as
# compare prints its verdicts, each after its task (which a verdict does
# not name): a comparison whose seeds the stopping rule stopped with the
# rule's decision as its verdict, any other by Holm's p; the headline
# table research/study.md quotes and
# tests/e2e/test_e2e_study_headline.sh recomputes.  Cells are grouped by
# their encoding (--by): each took its own lr and freq_lr_mult from the
# tune, which would otherwise leave every cell without a baseline of the
# same values.
study_headline() {
    study__headline_of "$1" 1 task,rope,rope_base,random_positions
    study__headline_of "$1" 2 rope,rope_base,random_positions
}

study__headline_of() {
    local db=$1 sweep=$2 by=$3
    local name task
    name=$(sqlite3 "$db" "SELECT name FROM sweeps WHERE sweep_id = $sweep")
    task=$(sqlite3 "$db" "SELECT group_concat(DISTINCT task) FROM jobs
                           WHERE sweep_id = $sweep AND stage = 'confirm'")
    echo "sweep $sweep ($name), stage confirm:"
    "$bifocal" compare "$sweep" --db "$db" --where stage=confirm --by "$by" \
        --format json \
        | jq -r --arg task "$task" '.[]
            | select(.loss_correction == "holm" or
                     (.stopping_rule.eval_depth? // -1) == .eval_depth)
            | "\(.task // $task): \(.verdict)"'
}

# study_family_seeds DB: each comparison of adaptive seeds in DB replayed
# with its rule of common/confseq.c (seeds.rule, t or sign; through its
# test probe, which a build with tests has) at alpha / m, m the comparisons of its stage, on
# the seed pairs it ran: the seed at which that rule decides, or
# "running" where it would have asked for more seeds than the stored
# rule gave.  For databases whose comparisons were decided before
# migration 22, at alpha alone (docs/results.md, Seeds until decided).
study_family_seeds() {
    local db=$1 probe=${CONFSEQ_PROBE:-$build/tests/common/confseq_probe}
    [ -x "$probe" ] || { echo "study_family_seeds: no $probe (a build with tests makes it)" >&2; return 1; }
    printf '%-5s %-8s %-8s %-30s %-3s %-9s %-10s %-8s %-5s %s\n' sweep stage task \
        variant m alpha_m stored at_seed family "ratio at the family's level"
    local sweep stage task variant m alpha margin min max state seed rule rs n r state_m low high
    while IFS='|' read -r sweep stage task variant m alpha margin min max state seed rule rs; do
        read -ra r <<<"$rs"
        # One look a pair, through one probe: the first look that is not
        # running, else the last.
        read -r state_m low high < <(
            for ((n = 1; n <= ${#r[@]}; n++)); do
                echo "decide $rule $alpha $margin $min $max $n ${r[*]:0:n}"
            done | "$probe" | jq -rs '(map(select(.state != "running")) + [last])[0]
                                      | "\(.state) \(.low) \(.high)"')
        printf '%-5s %-8s %-8s %-30s %-3s %-9.4g %-10s %-8s %-5s %s\n' "$sweep" "$stage" \
            "$task" "$variant" "$m" "$alpha" "$state" "$seed" "$state_m" \
            "$(awk -v l="$low" -v h="$high" 'BEGIN { if (l == "null") print "unbounded"
                else printf "[x%.3g, x%.3g]", exp(l), exp(h) }')"
    done < <(sqlite3 "$db" "${study__family_pairs_sql/RULE/$(study__rule_column "$db")}")
}

# The rule of each comparison: its column, or t in a database written
# before migration 26 (seeds.rule), whose every comparison the t rule
# decided.
study__rule_column() {
    sqlite3 "$1" "SELECT CASE count(*) WHEN 0 THEN '''t''' ELSE 'c.rule' END
                    FROM pragma_table_info('seed_comparisons')
                   WHERE name = 'rule'"
}

# Per comparison: its family's size and level, the rule's settings and the
# log loss ratio of each seed pair it ran (both succeeded, seed order), as
# store_seqs.c reads them.
study__family_pairs_sql="
  WITH fam AS (SELECT sweep_id, stage, count(*) AS m FROM seed_comparisons
                GROUP BY sweep_id, stage)
  SELECT c.sweep_id, c.stage, v1.task,
         json_extract(v1.config, '\$.rope') || ' base '
           || json_extract(v1.config, '\$.rope_base') || ' rp '
           || json_extract(v1.config, '\$.random_positions'),
         f.m, a.alpha / f.m, a.equivalence_margin, c.seeds_min, c.seeds_max,
         c.state, c.decided_seed, RULE,
         (SELECT group_concat(r, ' ') FROM (
            SELECT ln(fv.loss / fb.loss) AS r
              FROM jobs v JOIN jobs b ON b.sweep_id = v.sweep_id
                   AND b.cell = c.baseline_cell AND b.seed = v.seed
              JOIN final_evals fv ON fv.job_id = v.job_id
                   AND fv.eval_depth = c.eval_depth
              JOIN final_evals fb ON fb.job_id = b.job_id
                   AND fb.eval_depth = c.eval_depth
             WHERE v.sweep_id = c.sweep_id AND v.cell = c.variant_cell
               AND v.seed <= c.released ORDER BY v.seed))
    FROM seed_comparisons c JOIN fam f USING (sweep_id, stage)
    JOIN sweep_analysis a USING (sweep_id)
    JOIN jobs v1 ON v1.sweep_id = c.sweep_id AND v1.cell = c.variant_cell
                AND v1.seed = 1
   ORDER BY c.sweep_id, v1.task, c.variant_cell"

# study_cost: what a study job costs per step, standalone (bifocal-worker
# --job, 1 rank), per task at d_model 64 and for the scale check's model:
# wall seconds, and CPU seconds, which a machine shared with other work
# does not inflate (on an idle machine of C cores running C groups of 1
# rank, wall per step is CPU per step / C).  Then two dyck jobs on 2
# groups of 1 rank against the same two on 1 group of 2 ranks.
study_cost() {
    local worker; worker=$(dirname "$bifocal")/../worker/bifocal-worker
    local dir; dir=$(mktemp -d /tmp/study-cost.XXXXXX)
    local steps=300 job
    study__cost_job "$dir/dyck" dyck 64 2 "[4, 6, 8, 12]" 52 $steps 1
    study__cost_job "$dir/counter" counter 64 2 "[4, 6, 8, 12]" 52 $steps 1
    study__cost_job "$dir/code" code 64 2 "[4, 5]" 48 $steps 1
    study__cost_job "$dir/dyck128" dyck 128 4 "[4, 6, 8, 12]" 52 $steps 1
    study__cost_job "$dir/dyck-2" dyck 64 2 "[4, 6, 8, 12]" 52 $steps 2
    echo "load average $(cut -d' ' -f1-3 /proc/loadavg); $steps steps a job"
    echo "job: wall_s cpu_s cpu_s_per_step"
    for job in dyck counter code dyck128; do
        study__time "$job" $steps "$worker" --job "$dir/$job.yaml"
    done
    study__time "2 dyck jobs on 2 groups x 1 rank" $((2 * steps)) \
        study__two_groups "$worker" "$dir"
    study__time "2 dyck jobs on 1 group x 2 ranks" $((2 * steps)) \
        study__one_group "$worker" "$dir"
    rm -rf "$dir"
}

study__two_groups() {
    "$1" --job "$2/dyck.yaml" &
    "$1" --job "$2/dyck-2.yaml"
    wait
}

study__one_group() {
    local job
    for job in dyck dyck-2; do
        mpirun -np 2 --oversubscribe "$1" --job "$2/$job.yaml"
    done
}

# study__cost_job FILE TASK D_MODEL LAYERS EVAL_DEPTHS SEQ_LEN STEPS SEED:
# a job of the study's sizes (configs/study-frequency*.yaml: batch 32, 4
# heads, 256 eval examples, evaluated every 100 steps).
study__cost_job() {
    cat > "$1.yaml" <<EOF
task: $2
depth: 4
eval_depths: $5
eval_examples: 256
seq_len: $6
rope: spectral
d_model: $3
n_layers: $4
n_heads: 4
batch_size: 32
steps: $7
seed: $8
log_every: 50
eval_every: 100
freq_every: 100
checkpoint_every: 0
EOF
}

# study__time LABEL STEPS COMMAND...: one line of study_cost's table.
study__time() {
    local label=$1 steps=$2; shift 2
    local TIMEFORMAT='%R %U %S' t
    t=$( { time "$@" > /dev/null 2>&1; } 2>&1 )
    set -- $t
    echo "$label: $1 s wall, $(echo "$2 + $3" | bc) s CPU," \
         "$(echo "scale=4; ($2 + $3) / $steps" | bc) CPU s/step"
}
