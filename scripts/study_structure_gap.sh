# The first study (issue 10, research/findings.md "The first study, re-read"): sourced
# by scripts/study.sh, which sets $bifocal (the client).  One sweep,
# configs/study-structure-gap.yaml: every encoding on dyck, counter and
# modarith at one learning rate, 3 seeds, and surgical integration.  Its
# compact database is research/study/study.db (scripts/study.sh study_slim);
# its tables are `bifocal compare` output as printed (no primary family is
# declared, so each table is one Benjamini-Hochberg family); its figures
# are the `bifocal report` figures saved as PNG by scripts/report_png.js.
#
# Environment as Study 2's: STUDY_SMOKE=1 runs the same file at smoke
# scale (scripts/study_sweep.py --smoke), STUDY_DB and STUDY_OUT move the
# database (default runs/study.db) and the output folder (research/study).

# study_structure_gap [run|analyse]
study_structure_gap() {
    bf_install_pkgs python3-yaml sqlite3
    scripts/browser-deps.sh
    local db=${STUDY_DB:-runs/study.db} out=${STUDY_OUT:-research/study}
    mkdir -p "$(dirname "$db")" "$out"
    if [ "${1:-run}" = run ]; then
        rm -rf "$db" "$db"-wal "$db"-shm "$db".checkpoints "$db".log
        local sweep=configs/study-structure-gap.yaml
        if [ -n "${STUDY_SMOKE:-}" ]; then
            python3 scripts/study_sweep.py "$sweep" "$db.json" --smoke
            sweep=$db.json
        fi
        local start=$SECONDS
        "$bifocal" run "$sweep" --db "$db" --groups 2 --ranks 1 --no-dashboard
        echo "the study took $(( (SECONDS - start) / 60 )) min" \
             "$(( (SECONDS - start) % 60 )) s"
    fi
    # The tables from the compact copy (so that they recompute from
    # research/study/study.db alone), the figures from the whole database.
    local slim=$out/study.db
    study_slim "$db" "$slim"
    gap__tables "$slim" "$out"
    gap__figures "$db" "$out"
    gap__cost "$slim" > "$out/cost.txt"
    cat "$out/cost.txt"
    sqlite3 -header -column "$slim" "$study_frequencies_sql" \
        > "$out/frequencies.txt"
    cat "$out/frequencies.txt"
    echo "tables and figures in $out/; reports in ${db%.db}-*.html"
}

# Each encoding against fixed RoPE at base 1e4 (the fields a baseline
# does not use are named so that every group finds it), and the two
# learnable groups whose frequencies the figures draw, as the report
# labels them (the fields that vary within the encodings stage).
gap__baseline=rope=rope,rope_base=10000,freq_lr_mult=1,random_positions=0
gap__spectral="rope=spectral rope_base=10000 freq_lr_mult=1 random_positions=0"
gap__spectral10="rope=spectral rope_base=10000 freq_lr_mult=10 random_positions=0"

# gap__tables DB OUT: compare of each task's encodings and surgery.
gap__tables() {
    local db=$1 out=$2 task
    for task in dyck counter modarith; do
        "$bifocal" compare 1 --db "$db" --where stage=encodings,task=$task \
            --baseline "$gap__baseline" --verbose > "$out/encodings-$task.txt"
        "$bifocal" compare 1 --db "$db" --where stage=surgery,task=$task \
            --verbose > "$out/surgery-$task.txt"
    done
}

# gap__figures DB OUT: each report's figures as PNG; the reports stay
# beside the database.
gap__figures() {
    local db=$1 out=$2 task
    for task in dyck counter modarith; do
        "$bifocal" report 1 --db "$db" --where stage=encodings,task=$task \
            --baseline "$gap__baseline" -o "${db%.db}-$task.html"
        node scripts/report_png.js "${db%.db}-$task.html" "$out/$task" \
            "$gap__spectral" "$gap__spectral10"
        "$bifocal" report 1 --db "$db" --where stage=surgery,task=$task \
            -o "${db%.db}-surgery-$task.html"
        node scripts/report_png.js "${db%.db}-surgery-$task.html" \
            "$out/surgery-$task" "rope=spectral"
    done
}

# gap__cost DB: timing and outcome of every job, for the page's cost line.
gap__cost() {
    sqlite3 -header -column "$1" "
      SELECT count(DISTINCT job_id) AS jobs, count(*) AS attempts,
             sum(outcome = 'succeeded') AS succeeded,
             round((max(ended_ms) - min(started_ms)) / 60000.0, 1) AS wall_min,
             round(sum(ended_ms - started_ms) / 60000.0, 1) AS job_min
        FROM attempts"
}
