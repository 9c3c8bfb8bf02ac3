#!/usr/bin/env bash
# Study 2's headline table (research/study/frequency/headline.txt, quoted by
# research/study.md) recomputed from the study's compact data (study.db beside
# it) with scripts/study.sh headline, and compared with the stored text:
# fails when either was edited, or when research/findings.md no longer quotes
# every line of the real study's headline; the real study's
# family-seeds.txt (scripts/study.sh family-seeds) likewise.  Reads
# research/study/frequency when it holds a study, else BF_STUDY_DIR (the smoke
# study test_e2e_study.sh leaves in the build tree).  Then shows the check
# can fail: one final evaluation's loss changed in a copy of the data must
# change the table.
set -euo pipefail
root=${BF_SOURCE_ROOT:-$(dirname "$0")/../..}
study=$root/research/study/frequency
[ -f "$study/study.db" ] || study=${BF_STUDY_DIR:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -n "$study" ] && [ -f "$study/study.db" ] && [ -f "$study/headline.txt" ] \
    || fail "no study: research/study/frequency holds none and BF_STUDY_DIR ('${BF_STUDY_DIR:-}') has no study.db and headline.txt (run test_e2e_study first)"
dir=$(mktemp -d /tmp/bifocal-headline-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
headline() { "$root/scripts/study.sh" headline "$1"; }
headline "$study/study.db" > "$dir/recomputed"
diff -u "$study/headline.txt" "$dir/recomputed" \
    || fail "$study/headline.txt is not what its study.db recomputes"
[ "$(grep -c ' vs ' "$dir/recomputed")" = 18 ] \
    || fail "the headline has $(grep -c ' vs ' "$dir/recomputed") comparisons, not 18"
# research/findings.md quotes the real study's headline: every line of it.
if [ "$study" = "$root/research/study/frequency" ]; then
    while IFS= read -r line; do
        grep -qxF -- "$line" "$root/research/findings.md" \
            || fail "research/findings.md does not quote the headline line '$line'"
    done < "$study/headline.txt"
fi
# The early stops replayed at the family's level (research/findings.md, the
# correction), as kept beside the real study.
if [ "$study" = "$root/research/study/frequency" ]; then
    "$root/scripts/study.sh" family-seeds "$study/study.db" > "$dir/family"
    diff -u "$study/family-seeds.txt" "$dir/family" \
        || fail "$study/family-seeds.txt is not what its study.db replays"
    [ "$(grep -c ' lower \| higher ' "$dir/family")" = 9 ] \
        || fail "family-seeds: $(grep -c ' lower \| higher ' "$dir/family") early stops, not 9"
fi
cp "$study/study.db" "$dir/edited.db"
sqlite3 "$dir/edited.db" "
  UPDATE evals SET loss = loss * 1.5
   WHERE (job_id, depth, step) = (SELECT f.job_id, f.eval_depth, f.step
                                    FROM final_evals f JOIN jobs j USING (job_id)
                                   WHERE j.sweep_id = 1 AND j.stage = 'confirm'
                                     AND f.eval_depth = 12 LIMIT 1)"
headline "$dir/edited.db" > "$dir/edited"
if cmp -s "$dir/edited" "$study/headline.txt"; then
    fail "an edited final loss leaves the headline as it was"
fi
echo "headline of $study recomputes ($(grep -c ' vs ' "$dir/recomputed") comparisons)"
