#!/usr/bin/env python3
"""`bifocal results`, `compare` and `report` on a database the real store
wrote (results_fixture), read with --db and through a real bifocald.

Every statistic is recomputed here from the raw tables, independently of the
C code and of the SQL views: means and standard deviations with Python's
statistics module, Student-t quantiles by numerically integrating the t
density (checked against a printed table), geometric means and log-ratios,
Wilson and Newcombe intervals from their formulas (test_stats checks every
method against SciPy).

usage: test_results.py BIFOCAL BIFOCALD RESULTS_FIXTURE
"""
import csv
import functools
import io
import json
import math
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import bifocal_runner, check, finish, start_bifocald  # noqa: E402

BIFOCAL, BIFOCALD, FIXTURE = sys.argv[1:4]


def close(a, b, tol=1e-9):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


# ---- independent statistics ------------------------------------------------

def t_cdf(t, df):
    """P(T <= t) by Simpson's rule on the density from 0 to |t|."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    n = 4000
    h = abs(t) / n
    f = lambda x: c * (1 + x * x / df) ** (-(df + 1) / 2)
    s = f(0) + f(abs(t)) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, n))
    half = s * h / 3
    return 0.5 + half if t >= 0 else 0.5 - half


@functools.lru_cache(maxsize=None)
def t_quantile(q, df):
    lo, hi = 0.0, 50.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


# A printed table of t(0.975, df) (e.g. any statistics textbook).
for df, t in [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)]:
    assert abs(t_quantile(0.975, df) - t) < 2e-3 * t, (df, t_quantile(0.975, df))


def summary(xs):
    n = len(xs)
    mean = statistics.mean(xs)
    if n < 2:
        return dict(n=n, mean=mean, sd=None, lo=None, hi=None)
    sd = statistics.stdev(xs)
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return dict(n=n, mean=mean, sd=sd, lo=mean - half, hi=mean + half)


# ---- running bifocal -----------------------------------------------------------

bifocal = bifocal_runner(BIFOCAL, timeout=60)


tmp = tempfile.mkdtemp(prefix="bifocal-results-")
db = os.path.join(tmp, "fixture.db")
subprocess.run([FIXTURE, db], check=True)
conn = sqlite3.connect(db)

# Raw final evaluations, by (rope, eval depth): {seed: (loss, accuracy)}.
final = {}
for rope, seed, depth, loss, acc in conn.execute("""
        SELECT j.rope, j.seed, e.depth, e.loss, e.accuracy
          FROM jobs j JOIN evals e ON e.job_id = j.job_id
         WHERE j.sweep_id = 1 AND j.status = 'succeeded'
           AND e.step = (SELECT max(step) FROM evals WHERE job_id = j.job_id)"""):
    final.setdefault((rope, depth), {})[seed] = (loss, acc)
train = {}
for rope, seed, loss in conn.execute("""
        SELECT j.rope, j.seed, m.value FROM jobs j JOIN metrics m ON m.job_id = j.job_id
         WHERE j.sweep_id = 1 AND j.status = 'succeeded' AND m.key = 'loss'
           AND m.step = (SELECT max(step) FROM metrics WHERE job_id = j.job_id AND key = 'loss')"""):
    train.setdefault(rope, {})[seed] = loss

# ---- compare: every number against the independent values ----------------------

def log_summary(xs):
    s = summary([math.log(x) for x in xs])
    return dict(mean=math.exp(s["mean"]), log_sd=s["sd"],
                lo=s["lo"] and math.exp(s["lo"]), hi=s["hi"] and math.exp(s["hi"]))


Z = statistics.NormalDist().inv_cdf(0.975)


def wilson(k, n):
    p, z2n = k / n, Z * Z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = Z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    return p, max(centre - half, 0.0), min(centre + half, 1.0)


def newcombe(k1, k2, n):
    p1, l1, u1 = wilson(k1, n)
    p2, l2, u2 = wilson(k2, n)
    return (p1 - p2 - math.hypot(p1 - l1, u2 - p2),
            p1 - p2 + math.hypot(u1 - p1, p2 - l2))


examples = {e for (e,) in conn.execute(
    "SELECT DISTINCT coalesce(json_extract(config, '$.eval_examples'), 128) FROM jobs")}
check(len(examples) == 1, "the fixture's jobs share eval_examples: %r" % examples)
M = examples.pop()

rows = json.loads(bifocal("compare", "1", "--db", db, "--format", "json").stdout)
check(len(rows) == 6, "compare: 3 groups x 2 eval depths, got %d rows" % len(rows))
def families(rows, test=""):
    """The p-values each correction family of a compare table holds, of
    differences (test "": loss and accuracy) or of equivalence (test
    "_tost": loss): the seeds that would decide are planned at alpha over
    that count (Bonferroni)."""
    family = {"holm": 0, "benjamini-hochberg": 0}
    for r in rows:
        for metric in ("loss", "accuracy"):
            if r.get(metric + test + "_p") is not None:
                family[r[metric + test + "_correction"]] += 1
    return family


MARGIN = 0.1
BOUND = -math.log(1 - MARGIN)   # equivalent: x0.9..x1/0.9, |log ratio| < BOUND


def seeds_needed(lr, m_diff, m_equiv, alpha=0.05):
    """A fixed-n paired design's seeds (normal approximation, power 80%),
    the test they are for and the size of its family."""
    N = statistics.NormalDist()
    effect = abs(lr["mean"])
    if effect < BOUND:      # equivalence, TOST at alpha / its family
        test, m = "equivalence", m_equiv
        effect, z = BOUND - effect, N.inv_cdf(1 - alpha / m) + N.inv_cdf(0.8)
    else:                   # a difference, at the family's Bonferroni level
        test, m = "difference", m_diff
        z = N.inv_cdf(1 - alpha / (2 * m)) + N.inv_cdf(0.8)
    n = min(max(3, math.ceil(z * z * lr["sd"] ** 2 / effect ** 2)), 1000000)
    return n, test, m


def tost_p(lr, n):
    """TOST on n paired log-ratios: the larger one-sided p of the two
    t-tests against the bounds."""
    se = lr["sd"] / math.sqrt(n)
    return max(t_cdf(-(lr["mean"] + BOUND) / se, n - 1),
               t_cdf((lr["mean"] - BOUND) / se, n - 1))


def holm(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adj, run = [None] * len(ps), 0.0
    for j, i in enumerate(order):
        run = max(run, min(1.0, (len(ps) - j) * ps[i]))
        adj[i] = run
    return adj


def bh(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adj, run = [None] * len(ps), 1.0
    for j in reversed(range(len(ps))):
        run = min(run, len(ps) * ps[order[j]] / (j + 1))
        adj[order[j]] = run
    return adj



family = families(rows)
family_eq = families(rows, "_tost")

for r in rows:
    key = (r["rope"], r["eval_depth"])
    seeds = sorted(final[key])
    g = log_summary([final[key][k][0] for k in seeds])
    for field, want in [("mean", g["mean"]), ("log_sd", g["log_sd"]),
                        ("ci_low", g["lo"]), ("ci_high", g["hi"])]:
        check(close(r["loss_" + field], want, 1e-6),
              "compare %s loss_%s: %s, expected %s" % (key, field, r.get("loss_" + field), want))
    a = summary([final[key][k][1] for k in seeds])
    if len(seeds) >= 2:     # at the seeds, the binomial variance a floor
        accs = [final[key][k][1] for k in seeds]
        v = max(a["sd"] ** 2, statistics.mean(x * (1 - x) / M for x in accs))
        half = t_quantile(0.975, len(accs) - 1) * math.sqrt(v / len(accs))
        _, wlo, whi = wilson(sum(round(x * M) for x in accs), len(accs) * M)
        lo, hi = max(0, min(wlo, a["mean"] - half)), min(1, max(whi, a["mean"] + half))
    else:
        _, lo, hi = wilson(sum(round(final[key][k][1] * M) for k in seeds), len(seeds) * M)
    for field, want in [("mean", a["mean"]), ("sd", a["sd"]), ("ci_low", lo), ("ci_high", hi)]:
        check(close(r["accuracy_" + field], want, 1e-6),
              "compare %s accuracy_%s: %s, expected %s" % (key, field, r.get("accuracy_" + field), want))
    check(0 <= r["accuracy_ci_low"] <= r["accuracy_ci_high"] <= 1, "accuracy interval inside [0, 1]")
    check(r["n"] == len(seeds), "compare %s: n" % (key,))
    t = log_summary([train[r["rope"]][k] for k in seeds])
    check(close(r["train_loss_mean"], t["mean"], 1e-9) and close(r["train_loss_ci_high"], t["hi"], 1e-6),
          "compare %s: train loss statistics" % (key,))
    if r["rope"] == "rope":
        check("loss_ratio" not in r, "the baseline group has no ratio")
        continue
    base = final[("rope", r["eval_depth"])]
    shared = [k for k in seeds if k in base]
    check(r["n_paired"] == len(shared), "compare %s pairs on the %d shared seeds" % (key, len(shared)))
    lr = summary([math.log(final[key][k][0] / base[k][0]) for k in shared])
    check(close(r["loss_ratio"], math.exp(lr["mean"]), 1e-9), "compare %s loss ratio" % (key,))
    # accuracy is correct examples over M: the difference of counts
    d1 = [(round(final[key][k][1] * M) - round(base[k][1] * M)) / M for k in shared]
    check(close(r["accuracy_diff"], statistics.mean(d1), 1e-6), "compare %s accuracy difference" % (key,))
    if r["accuracy_p"] is not None:    # a seed-level t: its interval
        n = len(shared)
        within = statistics.mean((abs(x) - x * x) / M for x in d1)
        v = max(statistics.variance(d1), within / n)
        half = t_quantile(0.975, n - 1) * math.sqrt(v / n)
        lo, hi = max(-1, statistics.mean(d1) - half), min(1, statistics.mean(d1) + half)
        unit = "seeds"
    else:                              # McNemar decides: the examples'
        lo, hi = newcombe(sum(round(final[key][k][1] * M) for k in shared),
                          sum(round(base[k][1] * M) for k in shared), len(shared) * M)
        unit = "examples"
    check(close(r["accuracy_diff_ci_low"], lo, 1e-6) and close(r["accuracy_diff_ci_high"], hi, 1e-6)
          and r["accuracy_diff_ci_unit"] == unit,
          "compare %s accuracy interval (%s) %s, expected %s over %s"
          % (key, r["accuracy_diff_ci_unit"], r["accuracy_diff_ci_low"], lo, unit))
    wins = sum(final[key][k][0] < base[k][0] for k in shared)
    check(close(r["prob_improvement"], wins / len(shared)), "compare %s probability of improvement" % (key,))
    check(r["loss_correction"] == ("holm" if r["eval_depth"] == 8 else "benjamini-hochberg")
          and r["accuracy_correction"] == "benjamini-hochberg",
          "the correction is named: loss at depth 8 is the declared primary family")
    check(r["alpha"] == 0.05 and r["equivalence_margin"] == 0.1, "the default alpha and margin")
    if len(shared) >= 3:       # spectral: seeds 1..3, a t-interval on the log-ratios
        check(close(r["loss_ratio_ci_low"], math.exp(lr["lo"]), 1e-6)
              and close(r["loss_ratio_ci_high"], math.exp(lr["hi"]), 1e-6),
              "compare %s loss ratio interval" % (key,))
        tstat = lr["mean"] / (lr["sd"] / math.sqrt(len(shared)))
        check(close(r["loss_p"], 2 * t_cdf(-abs(tstat), len(shared) - 1), 1e-5),
              "compare %s loss p %s" % (key, r["loss_p"]))
        check(r["loss_p_adjusted"] >= r["loss_p"], "an adjusted p is never smaller")
        want = seeds_needed(lr, family[r["loss_correction"]],
                            family_eq[r["loss_tost_correction"]])
        got = (r["loss_seeds_needed"], r["loss_seeds_test"], r["loss_seeds_family"])
        check(got == want, "compare %s: the seeds that would decide: %s, expected %s"
              % (key, got, want))
    else:                      # bifocal lost seed 3: 2 pairs, no interval, no verdict
        check(r["loss_ratio_ci_low"] is None and r["loss_p"] is None,
              "compare %s: no interval from 2 seeds" % (key,))
        check("loss %s" % ("×%.3g" % r["loss_ratio"]) in r["verdict"]
              and "undecided: seed variance not estimable from 2 paired seeds" in r["verdict"],
              "the verdict says why there is none: " + r["verdict"])
        check(r["accuracy_p"] is None and r["accuracy_mcnemar_exact"] is False
              and "exact McNemar p >= " in r["verdict"]
              and "(needs per-example outcomes)" in r["verdict"],
              "a McNemar bound is no p and is printed as one: " + r["verdict"])
    check(r["verdict"].startswith("rope=%s vs rope=rope, eval depth %d" % key),
          "verdict names the groups and depth: " + r["verdict"])
    check("e+" not in r["verdict"], "percentages never print an exponent: " + r["verdict"])
    loss_word = r["verdict"].split(";")[0]
    check((" lower" in loss_word) == (r["loss_p_adjusted"] is not None and r["loss_p_adjusted"] < 0.05),
          "verdict follows the adjusted p: " + r["verdict"])

# Sweep 7 leaves spectral undecided at 5 seeds (results_fixture.c): the
# seeds that would decide are planned at its family's level, so they
# depend on how many p-values the correction covers.
rows7 = json.loads(bifocal("compare", "7", "--db", db, "--format", "json").stdout)
fam7, fam7_eq = families(rows7), families(rows7, "_tost")
raw7 = {}
for rope, seed, depth, loss in conn.execute("""
        SELECT j.rope, j.seed, e.depth, e.loss FROM jobs j
          JOIN evals e ON e.job_id = j.job_id
         WHERE j.sweep_id = 7 AND j.status = 'succeeded'"""):
    raw7.setdefault((rope, depth), {})[seed] = loss
family_mattered = 0
tost_family = {"holm": [], "benjamini-hochberg": []}
for r in rows7:
    if "loss_ratio" not in r:
        continue
    mine, base = raw7[(r["rope"], r["eval_depth"])], raw7[("rope", r["eval_depth"])]
    shared = [k for k in sorted(mine) if k in base]
    lr = summary([math.log(mine[k] / base[k]) for k in shared])
    want = seeds_needed(lr, fam7[r["loss_correction"]], fam7_eq[r["loss_tost_correction"]])
    got = (r["loss_seeds_needed"], r["loss_seeds_test"], r["loss_seeds_family"])
    check(got == want, "compare 7 %s at depth %d: %s seeds would decide, expected %s"
          % (r["rope"], r["eval_depth"], got, want))
    if "undecided: about %d seeds would decide" % want[0] in r["verdict"]:
        family_mattered += want[0] != seeds_needed(lr, 1, 1)[0]
    check(close(r["loss_tost_p"], tost_p(lr, len(shared)), 1e-5),
          "compare 7 %s at depth %d: TOST p %s, expected %s"
          % (r["rope"], r["eval_depth"], r["loss_tost_p"], tost_p(lr, len(shared))))
    check(r["loss_tost_correction"] == r["loss_correction"],
          "a TOST p is corrected as the loss p of its comparison")
    tost_family[r["loss_tost_correction"]].append(r)
check(fam7 == {"holm": 2, "benjamini-hochberg": 5}
      and fam7_eq == {"holm": 2, "benjamini-hochberg": 2} and family_mattered == 2,
      "sweep 7: both of spectral's undecided verdicts plan at their family's level, "
      "not at alpha itself: families %r %r, %d" % (fam7, fam7_eq, family_mattered))
# Equivalence is corrected in families of its own (Holm, BH), and the
# verdict follows the adjusted TOST p: bifocal's depth-8 TOST passes at
# alpha by itself but not after Holm over its family of 2 (results_fixture.c)
for name, fn in (("holm", holm), ("benjamini-hochberg", bh)):
    want = fn([r["loss_tost_p"] for r in tost_family[name]])
    got = [r["loss_tost_p_adjusted"] for r in tost_family[name]]
    check(all(close(a, w, 1e-12) for a, w in zip(got, want)),
          "%s adjusted TOST p-values: %r, expected %r" % (name, got, want))
    for r in tost_family[name]:
        equivalent = "equivalent within ×0.9..×1.11" in r["verdict"]
        check(equivalent == (r["loss_p_adjusted"] >= 0.05 and r["loss_tost_p_adjusted"] < 0.05),
              "the verdict follows the adjusted TOST p: " + r["verdict"])
bif = {r["eval_depth"]: r for r in rows7 if r["rope"] == "bifocal"}
check("TOST p=" in bif[4]["verdict"] and "equivalent within" in bif[4]["verdict"]
      and bif[8]["loss_tost_p"] < 0.05 <= bif[8]["loss_tost_p_adjusted"]
      and "seeds would show equivalence" in bif[8]["verdict"],
      "sweep 7: bifocal equivalent at depth 4, and at depth 8 only before "
      "correction: %r" % [bif[d]["verdict"] for d in (4, 8)])

# Sweep 4 has per-example outcomes (results_fixture.c): the n = 2
# case.  The t-test cannot run on 2 seeds, so the exact McNemar test on
# the pooled discordant examples (4 only spectral gets right, 1 only rope)
# decides, with the paired Newcombe interval over the pooled 2x2 table.
out = {(o[0], o[1]): bytes.fromhex(o[2]) for o in conn.execute(
    "SELECT j.rope, j.seed, lower(hex(o.bits)) FROM eval_outcomes o"
    " JOIN jobs j USING (job_id) WHERE j.sweep_id = 4")}
check(len(out) == 4, "sweep 4: 4 jobs with outcomes, got %d" % len(out))
bit = lambda rope, seed, i: out[(rope, seed)][i // 8] >> (i % 8) & 1
tab = {"both": 0, "a": 0, "b": 0}
for seed in (1, 2):
    for i in range(128):
        s_, r_ = bit("spectral", seed, i), bit("rope", seed, i)
        tab["both"] += s_ and r_
        tab["a"] += s_ and not r_
        tab["b"] += r_ and not s_
check((tab["a"], tab["b"]) == (4, 1), "sweep 4's discordant examples: %r" % tab)
# Its analysis block declares spectral the baseline by its zip label
# (`baseline: {label: learned}`; and alpha 0.1): rope
# is compared with it, unless --baseline says otherwise.
rows4 = json.loads(bifocal("compare", "4", "--db", db, "--format", "json").stdout)
rp = {r["rope"]: r for r in rows4}
check(rp["spectral"]["group"] == "learned" and rp["rope"]["group"] == "geometric",
      "a zip's labels name its groups: %r" % [(r["rope"], r["group"]) for r in rows4])
check(rp["spectral"]["baseline"] == "(this group)" and rp["rope"]["baseline"] == "learned"
      and rp["rope"]["accuracy_discordant"] == [1, 4] and rp["rope"]["alpha"] == 0.1
      and "one family (the sweep file declares no primary comparisons)"
      in bifocal("compare", "4", "--db", db, "--verbose").stdout,
      "compare 4 takes the declared baseline and alpha: %r" % rp["rope"])
rows4 = json.loads(bifocal("compare", "4", "--db", db, "--format", "json",
                           "--baseline", "rope=rope").stdout)
# a zip entry named by its label is the baseline its values are
check(json.loads(bifocal("compare", "4", "--db", db, "--format", "json",
                         "--baseline", "label=geometric").stdout) == rows4,
      "compare 4 --baseline label=geometric is --baseline rope=rope")
sp = [r for r in rows4 if r["rope"] == "spectral"][0]
k = min(tab["a"], tab["b"])
want_p = min(1.0, 2 * sum(math.comb(tab["a"] + tab["b"], i) for i in range(k + 1))
             / 2 ** (tab["a"] + tab["b"]))
check(sp["accuracy_mcnemar_exact"] is True and sp["accuracy_discordant"] == [4, 1]
      and close(sp["accuracy_mcnemar_p"], want_p, 1e-12)
      and close(sp["accuracy_p"], want_p, 1e-12),
      "compare 4: exact McNemar from the outcomes: %r" % {k_: sp.get(k_) for k_ in
      ("accuracy_mcnemar_exact", "accuracy_discordant", "accuracy_mcnemar_p")})
check(sp["verdict"].startswith("learned vs geometric, eval depth 4 ("),
      "the verdict names the groups by their labels: " + sp["verdict"])
check("seed variance not estimable from 2 seeds, so exact McNemar on 4 vs 1 "
      "discordant examples: p=%.2g" % sp["accuracy_p"] in sp["verdict"]
      and "needs per-example outcomes" not in sp["verdict"],
      "the verdict names the exact test: " + sp["verdict"])
n4 = 2 * 128
p1, l1, u1 = wilson(tab["both"] + tab["a"], n4)
p2, l2, u2 = wilson(tab["both"] + tab["b"], n4)
nb = n4 - tab["both"] - tab["a"] - tab["b"]
den = (tab["both"] + tab["a"]) * (tab["b"] + nb) * (tab["both"] + tab["b"]) * (tab["a"] + nb)
phi = (tab["both"] * nb - tab["a"] * tab["b"]) / math.sqrt(den) if den else 0.0
lo = p1 - p2 - math.sqrt(max(0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
hi = p1 - p2 + math.sqrt(max(0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
check(close(sp["accuracy_diff_ci_low"], lo, 1e-9) and close(sp["accuracy_diff_ci_high"], hi, 1e-9),
      "compare 4: the paired Newcombe interval %s, expected %s" %
      ([sp["accuracy_diff_ci_low"], sp["accuracy_diff_ci_high"]], [lo, hi]))

# Multiplicity: Holm within the declared primary family (loss at eval depth
# 8), Benjamini-Hochberg over every other p of the table.
fam = {"holm": [], "benjamini-hochberg": []}
for r in rows:
    for m in ("loss", "accuracy"):
        if r.get(m + "_p") is not None:
            fam[r[m + "_correction"]].append((r[m + "_p"], r[m + "_p_adjusted"]))
check(len(fam["holm"]) == 1 and len(fam["benjamini-hochberg"]) >= 3,
      "families: %r" % {k: len(v) for k, v in fam.items()})
for name, fn in (("holm", holm), ("benjamini-hochberg", bh)):
    want = fn([p for p, _ in fam[name]])
    check(all(close(a, w, 1e-12) for (_, a), w in zip(fam[name], want)),
          "%s adjusted p-values: %r, expected %r" % (name, fam[name], want))

# The table: a header, one line per row, the verdict lines; starred changes.
table = bifocal("compare", "1", "--db", db, "--verbose").stdout
check(table.count(" vs rope=rope, eval depth ") == 4, "table lists 4 verdict lines")
check(" *" in table and "± " in table and "×/ " in table, "table shows mean ± sd, geometric mean ×/ factor and the marker")
check("Holm (family-wise) within the primary family the sweep file declares "
      "(loss at eval depth 8), Benjamini-Hochberg (BH) over every other p" in table,
      "the table says which corrections it applied, and to which family")
check("(Holm) " in table and "(BH) " in table, "each verdict names its correction")
# CSV: the same numbers in full precision.
csv_rows = list(csv.DictReader(io.StringIO(bifocal("compare", "1", "--db", db, "--format", "csv").stdout)))
check(len(csv_rows) == 6 and all(close(float(c["loss_mean"]), r["loss_mean"], 1e-15)
                                 for c, r in zip(csv_rows, rows)), "compare csv matches json")
# --by and --baseline.
by = json.loads(bifocal("compare", "1", "--db", db, "--format", "json",
                        "--baseline", "rope=spectral").stdout)
check(all(r.get("baseline") in ("(this group)", "rope=spectral") for r in by),
      "--baseline rope=spectral compares with spectral")

# Several FIELD=VALUE pairs: every spectral group against rope at
# freq_lr_mult 1 (sweep 3 varies rope and freq_lr_mult); a number matches
# however it is written.
def baselines(*extra):
    rows = json.loads(bifocal("compare", "3", "--db", db, "--format", "json", *extra).stdout)
    return {(r["rope"], r["freq_lr_mult"]): r.get("baseline") for r in rows}
default = baselines()
# freq_lr_mult has no effect on rope=rope (nothing learnable): its labels
# leave it out.
check(default[("spectral", 10)] == "rope=rope",
      "by default a group's baseline keeps its other fields: %r" % default)
# A verdict names only the fields in which the pair differs; the table's
# group column every field that varies in the sweep.
r3 = [r for r in json.loads(bifocal("compare", "3", "--db", db, "--format", "json").stdout)
      if r["rope"] == "spectral" and r["freq_lr_mult"] == 10][0]
check(r3["group"] == "rope=spectral freq_lr_mult=10"
      and r3["compared"] == "rope=spectral vs rope=rope"
      and r3["verdict"].startswith("rope=spectral vs rope=rope, eval depth "),
      "labels: %r" % {k: r3[k] for k in ("group", "compared", "verdict")})
two = baselines("--baseline", "rope=rope,freq_lr_mult=1.0")
check(two[("spectral", 10)] == two[("spectral", 1)] == "rope=rope"
      and two[("rope", 1)] == "(this group)" and two[("rope", 10)] == "rope=rope",
      "--baseline rope=rope,freq_lr_mult=1.0 is every group's baseline: %r" % two)

# --where: only the matching jobs, as if the sweep held no others (rope no
# longer varies, so freq_lr_mult alone groups them).
where = json.loads(bifocal("compare", "3", "--db", db, "--format", "json",
                           "--where", "rope=spectral").stdout)
check(sorted({r["group"] for r in where}) == ["freq_lr_mult=1", "freq_lr_mult=10"]
      and all(r["n"] == 2 for r in where), "compare --where rope=spectral: %r" % where[:1])
res = json.loads(bifocal("results", "3", "--db", db, "--format", "json",
                         "--where", "rope=spectral,freq_lr_mult=1e1").stdout)
check([(r["config"]["rope"], r["config"]["freq_lr_mult"]) for r in res] == [("spectral", 10.0)] * 2,
      "results --where with two fields, a number written otherwise")
bifocal("report", "3", "--db", db, "--json", "--where", "freq_lr_mult=1",
        "-o", os.path.join(tmp, "where.json"))
rep = json.load(open(os.path.join(tmp, "where.json")))
check(len(rep["jobs"]) == 4, "report --where keeps 4 of 8 jobs: %d" % len(rep["jobs"]))
# report --by groups as compare --by does: sweep 3 by rope alone.
bifocal("report", "3", "--db", db, "--json", "--by", "rope",
        "-o", os.path.join(tmp, "by.json"))
rep = json.load(open(os.path.join(tmp, "by.json")))
by_rope = json.loads(bifocal("compare", "3", "--db", db, "--format", "json",
                             "--by", "rope").stdout)
check(rep["fields"] == ["rope"]
      and [g["label"] for g in rep["groups"]] == ["rope=rope", "rope=spectral"]
      and [g["jobs"] for g in rep["groups"]] == [4, 4]
      and [r["group"] for r in rep["compare"]] == [r["group"] for r in by_rope],
      "report --by rope: %r %r" % (rep["fields"], rep["groups"]))

# ---- the eval_summary view (for sqlite3 users) ---------------------------------

# It gives the numbers compare prints, where SQL can (all but the loss
# interval, which needs Student's t): the same to rounding, for every group
# and depth of every sweep.
SUMMARY = ["n", "eval_examples", "loss_mean", "loss_log_sd", "accuracy_mean",
           "accuracy_sd", "train_loss_mean", "train_loss_log_sd"]
conn.row_factory = sqlite3.Row
for sweep in (1, 3, 4):
    printed = {(r["rope"], r["eval_depth"], r.get("freq_lr_mult")): r
               for r in json.loads(bifocal("compare", str(sweep), "--db", db,
                                           "--format", "json").stdout)}
    sql = conn.execute("SELECT *, json_extract(group_config, '$.freq_lr_mult') AS flm"
                       " FROM eval_summary WHERE sweep_id = ?", (sweep,)).fetchall()
    check(len(sql) == len(printed), "eval_summary of sweep %d: %d rows, compare %d"
          % (sweep, len(sql), len(printed)))
    for row in sql:
        key = (row["rope"], row["eval_depth"], row["flm"] if sweep == 3 else None)
        want = printed.get(key)
        for col in SUMMARY:
            got = row[col]
            exp_ = want.get(col) if want else "missing"
            ok = (got is None and exp_ is None) or (
                got is not None and exp_ is not None and close(got, exp_, 1e-9))
            check(ok, "eval_summary sweep %d %r %s: %r, compare prints %r"
                  % (sweep, key, col, got, exp_))
        # compare's accuracy interval at the seeds is the mean -+ t * se
        if want and row["n"] > 1:
            half = t_quantile(0.975, row["n"] - 1) * row["accuracy_se"]
            m = row["eval_examples"]
            _, wlo, whi = wilson(round(row["accuracy_mean"] * row["n"] * m), row["n"] * m)
            lo = max(0, min(wlo, row["accuracy_mean"] - half))
            hi = min(1, max(whi, row["accuracy_mean"] + half))
            check(close(lo, want["accuracy_ci_low"], 1e-6) and close(hi, want["accuracy_ci_high"], 1e-6),
                  "eval_summary sweep %d %r accuracy_se %r: interval [%r, %r], compare [%r, %r]"
                  % (sweep, key, row["accuracy_se"], lo, hi, want["accuracy_ci_low"],
                     want["accuracy_ci_high"]))
conn.row_factory = None

# ---- results -------------------------------------------------------------------

res = bifocal("results", "1", "--db", db).stdout
check("loss is NaN at step 120" in res, "results shows a failed job's error")
check('"d_model"' not in res and max(len(l) for l in res.splitlines()) < 250,
      "results table carries no config blob")
res2 = bifocal("results", "2", "--db", db).stdout
check(res2.splitlines()[0].split()[6] == "lr", "results shows the varying field lr as a column")
rj = json.loads(bifocal("results", "1", "--db", db, "--format", "json").stdout)
check(len(rj) == 9 and rj[0]["config"]["d_model"] == 32, "results json carries the full config")
rc = list(csv.DictReader(io.StringIO(bifocal("results", "1", "--db", db, "--format", "csv").stdout)))
check(len(rc) == 9 and rc[8]["error"] == "loss is NaN at step 120", "results csv")

# ---- report --------------------------------------------------------------------

rep_json = os.path.join(tmp, "r.json")
bifocal("report", "1", "--db", db, "--json", "-o", rep_json)
rep = json.load(open(rep_json))
check([g["label"] for g in rep["groups"]] == ["rope=rope", "rope=spectral", "rope=bifocal"],
      "report groups")
check(all(c["step"][-1] == 200 for c in rep["train_loss"]), "training curves keep the last step")
last_rope = [c for c in rep["train_loss"] if c["group"] == 0][0]["mean"][-1]
check(close(last_rope, statistics.geometric_mean(train["rope"].values()), 1e-5),   # 6 digits
      "the curve's last point is the geometric mean final training loss")
check(sorted(f["group"] for f in rep["frequencies"]) == [1, 2],
      "frequencies for the learnable groups only")
spec = [f for f in rep["frequencies"] if f["group"] == 1][0]
check(len(spec["series"]) == 16 and spec["series"][0]["ratio"][0] == 1.0,
      "spectral: 4 heads x 4 pairs, ratio 1 at the first step")
html = os.path.join(tmp, "r.html")
bifocal("report", "1", "--db", db, "-o", html)
page = open(html).read()
check("</script> <!--<script>" not in page and "\\u003c/script>" in page,
      "markup from the sweep file is escaped inside the page's script")
check("<script src" not in page and "<link" not in page and "uPlot" in page
      and "BifocalReport" in page, "report is self-contained")

# The default table (issue 44): every fixture sweep's within 100 columns,
# one line per comparison with its verdict, what the columns mean once
# below; the stopping rule's state where adaptive seeds stopped (sweep 9:
# searched, staged and adaptive); a search in brief, its trials' values at
# 4 significant digits.
for sweep in (1, 3, 4, 5, 6, 7, 8, 9):
    out = bifocal("compare", str(sweep), "--db", db).stdout
    wide = [l for l in out.splitlines() if len(l) > 100]
    check(not wide, "compare %d fits 100 columns: %r" % (sweep, wide))
    check(out.count("loss ratio: the variant's") <= 1,
          "compare %d explains the table once" % sweep)
compact1 = bifocal("compare", "1", "--db", db).stdout
check("Against rope=rope:" in compact1
      and "\nrope=spectral  8      3 vs 3  0.7387      [0.6979, 0.782]   0.0019  lower\n" in compact1
      and "undecided (1)" in compact1 and "(1) seed variance not estimable" in compact1,
      "compare 1's compact lines:\n" + compact1)
compact9 = bifocal("compare", "9", "--db", db).stdout
rows9 = json.loads(bifocal("compare", "9", "--db", db, "--format", "json").stdout)
rule9 = [r["stopping_rule"] for r in rows9 if "stopping_rule" in r]
check(rule9 and "stopping rule" in compact9
      and "decided at %d/%d" % (rule9[0]["decided_seed"], rule9[0]["seeds_max"]) in compact9
      and "%s (rule)" % rule9[0]["state"] in compact9,
      "compare 9 shows the stopping rule's state: %r\n%s" % (rule9[:1], compact9))
check("search tune: 4 trials finished (2 more pruned: Selections)" in compact9
      and "pruned: job 58 at step 50 (1.1), job 59 at step 50 (1.316)" in compact9
      and "rope=spectral lr=0.003162  1.842" in compact9
      and "stage confirm, against rope=rope:" in compact9,
      "compare 9 shows its search in brief and its confirm stage:\n" + compact9)

# A search shown as a search (issue 44): sweep 9's selections list the
# trials its ASHA rule stopped, each at the rung of its decision with the
# metric's value there, as prune_decisions holds them (search_trials; the
# report's JSON gives numbers at 6 digits).
rep9 = os.path.join(tmp, "report-9.json")
bifocal("report", "9", "--db", db, "--json", "-o", rep9)
shown9 = sorted((t["job_id"], t["rung"], "%.6g" % t["value"])
                for c in json.load(open(rep9))["selections"] for t in c["pruned"])
stored9 = sorted((j, r, "%.6g" % v) for j, r, v in conn.execute(
    """SELECT d.job_id, d.rung, d.value FROM prune_decisions d
         JOIN jobs j ON j.job_id = d.job_id
        WHERE j.sweep_id = 9 AND d.decision = 'prune'"""))
check(stored9 and shown9 == stored9,
      "sweep 9's pruned trials in the report: %r, stored %r" % (shown9, stored9))

# Labels at 4 significant digits, more where two groups' values would
# print the same: sweep 3's freq_lr_mult 10 made 1.00001 beside 1.
close_db = os.path.join(tmp, "close.db")
shutil.copy(db, close_db)
cc = sqlite3.connect(close_db)
cc.execute("""UPDATE jobs SET config = json_set(config, '$.freq_lr_mult', 1.00001)
               WHERE sweep_id = 3 AND config ->> '$.freq_lr_mult' = 10""")
cc.commit()
cc.close()
close_groups = {r["group"] for r in json.loads(bifocal(
    "compare", "3", "--db", close_db, "--format", "json").stdout)}
check(close_groups == {"rope=rope", "rope=spectral freq_lr_mult=1",
                       "rope=spectral freq_lr_mult=1.00001"},
      "labels tell 1 and 1.00001 apart, and leave freq_lr_mult out of "
      "rope=rope's: %r" % close_groups)
check("rope=spectral freq_lr_mult=1.00001  4" in bifocal("compare", "3", "--db", close_db).stdout,
      "the compact table tells them apart too")

# Sweep 6: stage confirm took each rope cell's tuned lr (from: "stage:tune"),
# and the cells chose different lr.  That lr follows from the cell, so it is
# no grouping field: confirm's rope=spectral has its baseline rope=rope
# (issue 19), while the jobs still show their lr.
lrs = conn.execute("""SELECT count(DISTINCT config ->> '$.lr') FROM jobs
                       WHERE sweep_id = 6 AND stage = 'confirm'""").fetchone()[0]
check(lrs == 2, "the fixture's confirm cells chose different lr: %d" % lrs)
tuned = bifocal("compare", "6", "--db", db, "--baseline", "rope=rope", "--verbose").stdout
check("stage=confirm: rope=spectral vs rope=rope" in tuned,
      "confirm's rope=spectral is paired with rope=rope:\n" + tuned)
tuned_rows = json.loads(bifocal("compare", "6", "--db", db, "--format", "json").stdout)
tune_rows = [r for r in tuned_rows if "stage=tune" in r["group"]]
check(tune_rows and all(r.get("search_trial") is True and "compared" not in r
                        and "verdict" not in r for r in tune_rows),
      "a search's trials are no comparisons: %r" % [r.get("compared") for r in tune_rows])
check("A search's trials are candidates for its selection" in
      bifocal("compare", "6", "--db", db, "--verbose").stdout, "the footer says what the trials are")
confirm_groups = {r["group"] for r in tuned_rows if "stage=confirm" in r["group"]}
check(confirm_groups == {"stage=confirm rope=rope", "stage=confirm rope=spectral"},
      "confirm groups by rope alone: %r" % confirm_groups)
tuned_jobs = bifocal("results", "6", "--db", db, "--where", "stage=confirm",
                     "--format", "json").stdout
check("0.00316" in tuned_jobs, "the confirm jobs' rows show their lr")

# Stages are families: sweep 7 copied into a second stage, each stage's
# p-values are adjusted among that stage's alone, so that compare of one
# stage (--where stage=b) says what the whole table says of it.
staged_db = os.path.join(tmp, "staged.db")
shutil.copy(db, staged_db)
sc = sqlite3.connect(staged_db)
sc.executescript("""
    CREATE TEMP TABLE t AS SELECT * FROM jobs WHERE sweep_id = 7;
    UPDATE t SET job_id = job_id + 1000000, idx = idx + 1000, stage = 'b',
                 config_hash = printf('%016x', job_id + 1000000);
    INSERT INTO jobs SELECT * FROM t;
    CREATE TEMP TABLE e AS SELECT * FROM evals
     WHERE job_id IN (SELECT job_id FROM t) OR job_id + 1000000 IN (SELECT job_id FROM t);
    DELETE FROM e WHERE job_id >= 1000000;
    UPDATE e SET job_id = job_id + 1000000;
    INSERT INTO evals SELECT * FROM e;
    UPDATE jobs SET stage = 'a' WHERE sweep_id = 7 AND job_id < 1000000;""")
sc.commit()
sc.close()


def adjusted(rows):
    return {(r["group"].replace("stage=b ", ""), r["eval_depth"]):
            (r.get("loss_p_adjusted"), r.get("accuracy_p_adjusted"))
            for r in rows if "stage=a" not in r["group"] and "loss_p" in r}


whole = adjusted(json.loads(bifocal("compare", "7", "--db", staged_db,
                                    "--format", "json").stdout))
alone = adjusted(json.loads(bifocal("compare", "7", "--db", staged_db,
                                    "--where", "stage=b",
                                    "--format", "json").stdout))
check(whole and whole == alone,
      "stage b's adjusted p-values in the whole table %r, alone %r"
      % (whole, alone))

# A comparison whose seeds a stopping rule stopped: spectral against rope
# in sweep 7, decided lower at depth 8 by the rule.  Its rows (both depths)
# lead with the rule's decision, their fixed-n p-values stay descriptive
# (no adjusted p, no verdict word, no seed plan), and the families are
# bifocal's alone.
ruled_db = os.path.join(tmp, "ruled.db")
shutil.copy(db, ruled_db)
rc = sqlite3.connect(ruled_db)
cell = dict(rc.execute("SELECT rope, cell FROM jobs WHERE sweep_id = 7 GROUP BY rope"))
rc.execute("""INSERT INTO seed_comparisons (sweep_id, variant_cell, baseline_cell,
                  eval_depth, seeds_min, seeds_max, released, state, n_pairs,
                  ci_low, ci_high, decided_seed, alpha)
              VALUES (7, ?, ?, 8, 3, 20, 5, 'lower', 5, -0.4, -0.05, 5, 0.025)""",
           (cell["spectral"], cell["rope"]))
rc.commit()
rc.close()
ruled = json.loads(bifocal("compare", "7", "--db", ruled_db, "--format", "json").stdout)
spec = {r["eval_depth"]: r for r in ruled if r["rope"] == "spectral"}
bif_ruled = [r for r in ruled if r["rope"] == "bifocal"]
check(all(r.get("stopping_rule", {}).get("state") == "lower"
          and "loss_p_adjusted" not in r and "accuracy_p_adjusted" not in r
          and "loss_seeds_needed" not in r for r in spec.values()),
      "a stopped comparison's fixed-n tests join no family: %r" % spec)
check("stopping rule (the verdict of record): decided lower at seed 5, loss ratio in "
      "[×0.67, ×0.951] (97.5% sequence); descriptive after its stop, no verdict: loss"
      in spec[8]["verdict"] and " lower" not in spec[8]["verdict"].split("no verdict:")[1]
      and "stopping rule at eval depth 8" in spec[4]["verdict"],
      "the rule's decision is the verdict: %r" % [spec[d]["verdict"] for d in (4, 8)])
check(all(r["loss_seeds_family"] == 1 for r in bif_ruled if "loss_seeds_family" in r)
      and bif_ruled[1]["loss_p_adjusted"] == bif_ruled[1]["loss_p"],
      "bifocal's families no longer hold spectral's p: %r" % bif_ruled)

# ---- errors, each a clear message ----------------------------------------------

def error(args, text):
    p = bifocal(*args, expect=1)
    check(text in p.stderr, "%s: stderr %r lacks %r" % (" ".join(args), p.stderr, text))


error(["compare", "99", "--db", db], "no sweep with id 99")
error(["report", "99", "--db", db], "no sweep with id 99")
error(["compare", "2", "--db", db], "sweep 2 has no succeeded job")
error(["report", "2", "--db", db], "sweep 2 has no succeeded job")
error(["compare", "1", "--db", db, "--by", "lr"], "--by lr: not a field that varies")
error(["report", "1", "--db", db, "--by", "lr"], "--by lr: not a field that varies")
error(["compare", "1", "--db", db, "--baseline", "rope=nope"], "no group of sweep 1 has rope=nope")
error(["compare", "4", "--db", db, "--baseline", "label=nope"],
      "--baseline label=nope: no zip entry of sweep 4 is labelled 'nope'")
error(["compare", "3", "--db", db, "--baseline", "rope=rope,freq_lr_mult=3"],
      "no group of sweep 3 has rope=rope,freq_lr_mult=3")
error(["compare", "3", "--db", db, "--baseline", "rope=rope,lr=1"], "'lr=1' is not")
error(["compare", "3", "--db", db, "--where", "rope=none"], "--where rope=none: no job of sweep 3 has it")
error(["report", "3", "--db", db, "--where", "rope"], "expected FIELD=VALUE[,...], not 'rope'")
# An empty pair would filter nothing: refused.
for where in [",", "", "rope=rope,", ",rope=rope"]:
    error(["results", "3", "--db", db, "--where", where], "(an empty pair)")
notdb = os.path.join(tmp, "notes.txt")
open(notdb, "w").write("just some text, long enough to be read as a header " * 4)
error(["results", "1", "--db", notdb], "is not a SQLite database")
other = os.path.join(tmp, "other.db")
sqlite3.connect(other).execute("CREATE TABLE t (x)")
error(["compare", "1", "--db", other], "is a SQLite database but not a Bifocal one")
error(["results", "1", "--db", os.path.join(tmp, "missing.db")], "cannot open database")
check(bifocal("compare", "1", "--db", db, "--format", "yaml", expect=2).returncode == 2,
      "an unknown format is a usage error")

# ---- the same through a real bifocald ------------------------------------------

ddb = os.path.join(tmp, "daemon.db")
shutil.copy(db, ddb)
daemon, server = start_bifocald(BIFOCALD, ddb, tmp)
try:
    via = bifocal("compare", "1", "--format", "json", server=server).stdout
    check(json.loads(via) == rows, "compare through the daemon equals compare --db")
    check(bifocal("results", "1", server=server).stdout == res, "results through the daemon")
    w = bifocal("watch", "1", server=server, expect=1)
    check("job 9 (rope=bifocal seed=3): loss is NaN at step 120" in w.stderr,
          "watch lists the failed job with its error: " + w.stderr)
    bifocal("watch", "2", server=server, expect=1)
    p = bifocal("compare", "99", server=server, expect=1)
    check("no sweep with id 99" in p.stderr, "unknown sweep through the daemon: " + p.stderr)
    bifocal("report", "1", "-o", os.path.join(tmp, "d.html"), server=server)
    # jobs, status and workers: --format, and no config blob in a table.
    jobs = bifocal("jobs", "--sweep", "1", server=server).stdout
    check('"d_model"' not in jobs and max(len(l) for l in jobs.splitlines()) < 250
          and "loss is NaN" in jobs, "jobs table: no config blob, errors shown")
    jj = json.loads(bifocal("jobs", "--sweep", "1", "--format", "json", server=server).stdout)
    check(len(jj) == 9 and jj[0]["config"]["n_heads"] == 4, "jobs json carries the config")
    st = list(csv.DictReader(io.StringIO(bifocal("status", "--format", "csv", server=server).stdout)))
    check([r["sweep_id"] for r in st] == [str(k) for k in range(1, 10)] and st[0]["failed"] == "1", "status csv")
    wk = json.loads(bifocal("workers", "--format=json", server=server).stdout)
    check(wk[0]["name"] == "fixture-worker", "workers json")
finally:
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=30)

shutil.rmtree(tmp)
finish()
