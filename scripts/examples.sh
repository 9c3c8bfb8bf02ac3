#!/usr/bin/env bash
# The printed examples of README.md, made from kept data and checked
# against it, at one named dispatch level: BIFOCAL_ISA=avx2 with
# OpenBLAS's Haswell kernels (engine/isa.h), which every x86-64 machine
# of the last decade runs, so any reader's machine can print them bit for
# bit (the best level differs between machines, and with it the
# rounding: an AVX-512 machine prints other digits).
#
#   scripts/examples.sh make [BUILD]    trains the quickstart sweep at that
#       level, keeps its database in research/examples/ and writes
#       README.md's example block from it
#   scripts/examples.sh write [BUILD]   writes the block from the kept
#       database (after a change to what compare prints)
#   scripts/examples.sh check [BUILD]   fails when README.md's block is not
#       what `bifocal compare` prints of the kept database or has a line
#       over 100 columns, or when the
#       quickstart's first job, trained again at that level, does not give
#       the kept job's evaluations bit for bit (test_examples)
#
# BUILD is a build directory (default build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
build=$(cd "${2:-$root/build}" && pwd)
kept=$root/research/examples/quickstart.db
readme=$root/README.md
begin='<!-- example: quickstart-compare -->'
end='<!-- /example -->'
export BIFOCAL_ISA=avx2 OPENBLAS_CORETYPE=Haswell

# The block README.md shows: the command and what it prints.
block() {
    echo '```'
    echo '$ bifocal compare 1 --db runs/quickstart.db'
    "$build/cli/bifocal" compare 1 --db "$1"
    echo '```'
}

# README.md with the lines between the markers replaced by stdin.
splice() {
    awk -v b="$begin" -v e="$end" -v f="$1" '
        $0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
        $0 == e { skip = 0 }
        !skip' "$readme"
}

# The block as README.md has it.
shown() {
    awk -v b="$begin" -v e="$end" '$0 == e { on = 0 } on; $0 == b { on = 1 }' "$readme"
}

# One job's evaluations, every digit: "step depth loss accuracy" lines.
evals() {
    sqlite3 "$1" "SELECT step, depth, printf('%.17g', loss),
                         printf('%.17g', accuracy)
                    FROM evals WHERE job_id = $2 ORDER BY step, depth"
}

write_examples() {
    local dir; dir=$(mktemp -d /tmp/bifocal-examples.XXXXXX)
    trap 'rm -rf "$dir"' RETURN
    block "$kept" > "$dir/block"
    splice "$dir/block" > "$dir/readme"
    cp "$dir/readme" "$readme"
}

make_examples() {
    local dir; dir=$(mktemp -d /tmp/bifocal-examples.XXXXXX)
    trap 'rm -rf "$dir"' RETURN
    "$build/cli/bifocal" run "$root/configs/quickstart.yaml" --db "$dir/q.db"
    mkdir -p "$(dirname "$kept")"
    # whole (300 KB): the report drawn from it shows every curve; a
    # rollback journal, so that a read-only checkout can read it
    rm -f "$kept"
    sqlite3 "$dir/q.db" ".backup '$kept'"
    sqlite3 "$kept" "VACUUM; PRAGMA journal_mode = DELETE;" > /dev/null
    write_examples
}

check_examples() {
    local dir; dir=$(mktemp -d /tmp/bifocal-examples.XXXXXX)
    trap 'rm -rf "$dir"' RETURN
    [ -f "$kept" ] || { echo "FAIL: no $kept (scripts/examples.sh make)" >&2; return 1; }
    block "$kept" > "$dir/block"
    shown > "$dir/shown"
    diff -u "$dir/shown" "$dir/block" || {
        echo "FAIL: README.md's example is not what bifocal compare prints of $kept (scripts/examples.sh make)" >&2
        return 1; }
    # compare's default table fits 100 columns (characters, not bytes)
    python3 -c 'import sys; sys.exit(any(len(l.rstrip("\n")) > 100
                for l in open(sys.argv[1], encoding="utf-8")))' "$dir/block" || {
        echo "FAIL: README.md's example has a line over 100 columns" >&2; return 1; }
    # The kept sweep's first job as a sweep of its own: same config, same
    # worker group.
    local job; job=$(sqlite3 "$kept" "SELECT min(job_id) FROM jobs")
    sqlite3 "$kept" "SELECT config FROM jobs WHERE job_id = $job" > "$dir/kept.json"
    python3 - "$dir/kept.json" > "$dir/one.yaml" <<'EOF'
import json, sys
config = json.load(open(sys.argv[1]))
seed = config.pop("seed")
print(json.dumps({"name": "examples-check", "base": config, "seeds": [seed]}))
EOF
    "$build/cli/bifocal" run "$dir/one.yaml" --db "$dir/one.db" > "$dir/run.out" 2>&1 || {
        cat "$dir/run.out" >&2; echo "FAIL: bifocal run of the first job" >&2; return 1; }
    local again; again=$(sqlite3 "$dir/one.db" "SELECT min(job_id) FROM jobs")
    [ "$(sqlite3 "$dir/one.db" "SELECT config FROM jobs WHERE job_id = $again")" \
      = "$(cat "$dir/kept.json")" ] || {
        echo "FAIL: the job trained again has another config than the kept one" >&2; return 1; }
    evals "$kept" "$job" > "$dir/kept.evals"
    evals "$dir/one.db" "$again" > "$dir/again.evals"
    [ -s "$dir/kept.evals" ] || { echo "FAIL: the kept job has no evaluation" >&2; return 1; }
    diff -u "$dir/kept.evals" "$dir/again.evals" || {
        echo "FAIL: job $job trained again at BIFOCAL_ISA=avx2 does not give the kept evaluations bit for bit" >&2
        return 1; }
    echo "examples: README.md's block is what compare prints of $kept, whose job $job trains again bit for bit ($(wc -l < "$dir/kept.evals") evaluations)"
}

case $mode in
    make) make_examples ;;
    write) write_examples ;;
    check) check_examples ;;
    *) echo "usage: scripts/examples.sh make|write|check [BUILD]" >&2; exit 2 ;;
esac
