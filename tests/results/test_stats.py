"""results/stats.c against SciPy: each method recomputed independently
(scipy.stats; Debian's python3-scipy) and each degenerate case (n=1, n=2,
zero variance, all correct, all wrong, a missing seed) with its message.

usage: test_stats.py STATS_PROBE"""
import math
import os
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'common'))
from probe import Probe  # noqa: E402

probe = Probe(sys.argv[1])
failures = probe.failures
ask = probe.ask


def close(what, got, want, tol=1e-9):
    if want is None or (isinstance(want, float) and math.isnan(want)):
        ok = got is None
    else:
        ok = got is not None and abs(got - want) <= tol * max(1.0, abs(want))
    if not ok:
        failures.append(f"{what}: got {got}, want {want}")


def same(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def ratio(a, b):
    return ask("ratio", len(a), *a, *b)


# ---- geometric-mean ratio, paired: t-interval of the per-seed log-ratios
a = [0.21, 0.35, 0.18, 0.50]
b = [0.90, 0.80, 1.10, 0.70]
r = ratio(a, b)
lr = np.log(np.array(a) / np.array(b))
res = stats.ttest_1samp(lr, 0.0)
ci = res.confidence_interval(0.95)
close("paired ratio", r["ratio"], math.exp(lr.mean()))
close("paired ratio low", r["lo"], math.exp(ci.low))
close("paired ratio high", r["hi"], math.exp(ci.high))
close("paired p", r["p"], res.pvalue)
same("paired n", r["n_paired"], 4)
# TOST at margin 10%: the larger one-sided p of the two shifted t-tests,
# the region x0.9..x1/0.9 (symmetric on the log scale)
lo_b, hi_b = math.log(0.9), -math.log(0.9)
tost = max(stats.ttest_1samp(lr, lo_b, alternative="greater").pvalue,
           stats.ttest_1samp(lr, hi_b, alternative="less").pvalue)
close("tost far from 1", r["tost"], tost)

# equivalent: small, tight log-ratios
ae = [1.00, 1.01, 0.99, 1.02, 1.00]
be = [1.01, 1.00, 1.00, 1.01, 1.02]
r = ratio(ae, be)
lr = np.log(np.array(ae) / np.array(be))
tost = max(stats.ttest_1samp(lr, lo_b, alternative="greater").pvalue,
           stats.ttest_1samp(lr, hi_b, alternative="less").pvalue)
close("tost equivalent", r["tost"], tost)
if not tost < 0.05:
    failures.append(f"the equivalence case is not equivalent: {tost}")
# the seeds that show equivalence: TOST one-sided at alpha, and at
# alpha / 8 in a family of 8 TOST p-values (Bonferroni)
var = lr.var(ddof=1)
for key, level in (("seeds", 0.05), ("seeds_of_8", 0.05 / 8)):
    z = stats.norm.ppf(1 - level) + stats.norm.ppf(0.8)
    same("equivalence " + key, r[key],
         max(3, math.ceil(z * z * var / (hi_b - abs(lr.mean())) ** 2)))
# the region is symmetric: the inverse ratios give the same TOST p
close("tost symmetric", ratio(be, ae)["tost"], tost)

# ---- partial pairing: seed 3 missing from the variant
a = [0.40, 0.35, float("nan"), 0.30, 0.45]
b = [0.50, 0.52, 0.61, 0.40, 0.49]
r = ratio(a, b)
keep = [i for i in range(5) if not math.isnan(a[i])]
lr = np.log(np.array([a[i] for i in keep]) / np.array([b[i] for i in keep]))
res = stats.ttest_1samp(lr, 0.0)
same("partial pairing n", r["n_paired"], 4)
close("partial ratio", r["ratio"], math.exp(lr.mean()))
close("partial p", r["p"], res.pvalue)
close("partial low", r["lo"], math.exp(res.confidence_interval(0.95).low))

# ---- Welch on the logs: no seed shared
a = [0.4, 0.5, 0.45, float("nan"), float("nan"), float("nan")]
b = [float("nan"), float("nan"), float("nan"), 0.6, 0.9, 0.7]
r = ratio(a, b)
la, lb = np.log([0.4, 0.5, 0.45]), np.log([0.6, 0.9, 0.7])
res = stats.ttest_ind(la, lb, equal_var=False)
sa, sb = la.var(ddof=1) / 3, lb.var(ddof=1) / 3     # SciPy 1.10's Welch
df = (sa + sb) ** 2 / (sa ** 2 / 2 + sb ** 2 / 2)   # gives p, not the CI
half = stats.t.ppf(0.975, df) * math.sqrt(sa + sb)
same("welch n_paired", r["n_paired"], 0)
close("welch ratio", r["ratio"], math.exp(la.mean() - lb.mean()))
close("welch p", r["p"], res.pvalue)
close("welch df", r["df"], df)
close("welch low", r["lo"], math.exp(la.mean() - lb.mean() - half), 1e-7)
close("welch high", r["hi"], math.exp(la.mean() - lb.mean() + half), 1e-7)
# seeds a fixed-n paired design needs: (z_.975 + z_.8)^2 var / effect^2
var = (la.var(ddof=1) / 3 + lb.var(ddof=1) / 3) * 3
z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
same("welch seeds needed", r["seeds"],
     max(3, math.ceil(z * z * var / (la.mean() - lb.mean()) ** 2)))
# in a family of 8 corrected p-values: at the Bonferroni level 0.05 / 8
z8 = stats.norm.ppf(1 - 0.05 / 16) + stats.norm.ppf(0.8)
same("welch seeds needed in a family of 8", r["seeds_of_8"],
     max(3, math.ceil(z8 * z8 * var / (la.mean() - lb.mean()) ** 2)))

# ---- degenerate loss cases and their messages
r = ratio([0.5], [0.6])
same("n=1 note", r["note"], "seed variance not estimable from 1 seeds in the "
     "smaller group")
close("n=1 ratio", r["ratio"], 0.5 / 0.6)
close("n=1 p", r["p"], None)
r = ratio([0.5, 0.4], [0.6, 0.5])
same("n=2 note", r["note"], "seed variance not estimable from 2 paired seeds")
close("n=2 low", r["lo"], None)
r = ratio([0.5, 0.4, 0.3], [1.0, 0.8, 0.6])
same("zero variance note", r["note"],
     "no spread between the 3 paired seeds: seed variance not estimable")
close("zero variance ratio", r["ratio"], 0.5)
close("zero variance p", r["p"], None)
r = ratio([0.5, float("nan")], [float("nan"), float("nan")])
same("missing baseline note", r["note"], "no seed in the baseline")

# ---- group loss summary: geometric mean, log-scale interval (never < 0)
x = [0.01, 0.5, 2.0]
g = ask("glog", 3, *x)
lx = np.log(x)
ci = stats.ttest_1samp(lx, 0.0).confidence_interval(0.95)
close("geometric mean", g["mean"], math.exp(lx.mean()))
close("geometric low", g["lo"], math.exp(ci.low))
close("geometric high", g["hi"], math.exp(ci.high))

# ---- Wilson and Clopper-Pearson (all wrong, all right, in between)
for k, n in [(0, 128), (128, 128), (126, 128), (37, 90), (1, 1)]:
    w = ask("wilson", k, n)
    lo, hi = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    close(f"wilson {k}/{n} low", w["lo"], lo)
    close(f"wilson {k}/{n} high", w["hi"], hi)
    c = ask("cp", k, n)
    lo, hi = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    close(f"clopper-pearson {k}/{n} low", c["lo"], lo, 1e-9)
    close(f"clopper-pearson {k}/{n} high", c["hi"], hi, 1e-9)
    if not (0 <= c["lo"] <= c["hi"] <= 1 and 0 <= w["lo"] <= w["hi"] <= 1):
        failures.append(f"{k}/{n}: an interval leaves [0, 1]")


# ---- Newcombe's hybrid score interval (method 10), from SciPy's Wilson
def newcombe(k1, n1, k2, n2):
    l1, u1 = stats.binomtest(k1, n1).proportion_ci(0.95, method="wilson")
    l2, u2 = stats.binomtest(k2, n2).proportion_ci(0.95, method="wilson")
    p1, p2 = k1 / n1, k2 / n2
    return (p1 - p2 - math.hypot(p1 - l1, u2 - p2),
            p1 - p2 + math.hypot(u1 - p1, p2 - l2))


for case in [(256, 256, 252, 256), (0, 128, 3, 128), (56, 70, 48, 80)]:
    got = ask("newcombe", *case)
    lo, hi = newcombe(*case)
    close(f"newcombe {case} low", got["lo"], lo)
    close(f"newcombe {case} high", got["hi"], hi)

# ---- exact McNemar: the two-sided binomial test of b against c
for b_, c_ in [(0, 4), (3, 11), (10, 10), (0, 0), (40, 20)]:
    got = ask("mcnemar", b_, c_)["p"]
    want = 1.0 if b_ + c_ == 0 else stats.binomtest(b_, b_ + c_).pvalue
    close(f"mcnemar {b_},{c_}", got, want)

# ---- Holm and Benjamini-Hochberg, worked by hand (SciPy 1.10 has
# neither).  Sorted: 0.005 0.01 0.03 0.04 0.04 0.2, m = 6.
# BH, m p_(j) / j from the top, running min: 0.2, 0.048, 0.048 (0.06),
# 0.048 (0.06), 0.03, 0.03.
p = [0.01, 0.04, 0.03, 0.005, 0.2, 0.04]
got = ask("bh", len(p), *p)["adjusted"]
for i, want in enumerate([0.03, 0.048, 0.048, 0.03, 0.2, 0.048]):
    close(f"bh {i}", got[i], want)
# Holm, (m - j) p_(j) from the bottom, running max: 0.03, 0.05, 0.12,
# 0.12, 0.12 (0.08), 0.2.
order = sorted(range(len(p)), key=lambda i: p[i])
holm, running = [0.0] * len(p), 0.0
for j, i in enumerate(order):
    running = max(running, min(1.0, (len(p) - j) * p[i]))
    holm[i] = running
got = ask("holm", len(p), *p)["adjusted"]
for i in range(len(p)):
    close(f"holm {i}", got[i], holm[i])
same("holm table", [round(x, 4) for x in holm],
     [0.05, 0.12, 0.12, 0.03, 0.2, 0.12])
got = ask("bh", 3, 0.01, "nan", 0.02)["adjusted"]
same("bh leaves nan out of the family", got[1], None)
close("bh of two", got[2], 0.02)

# ---- accuracy: the case.  126/128 on both seeds against 128/128:
# per-seed differences identical, n=2: no t verdict; the counts bound the
# exact McNemar p from below (4 discordant pairs at least): 0.125.
d = ask("acc", 2, 128, 128, 128, 126, 126)
same("acc n=2 note", d["note"], "seed variance not estimable from 2 seeds")
close("acc n=2 t", d["t_p"], None)
close("acc n=2 mcnemar bound", d["mcnemar_p"],
      stats.binomtest(0, 4).pvalue)
close("acc n=2 mcnemar bound 0.125", d["mcnemar_p"], 0.125)
same("acc n=2 bound, not exact", d["p_exact"], 0)
lo, hi = newcombe(256, 256, 252, 256)
close("acc newcombe", d["lo"], lo)
close("acc newcombe high", d["hi"], hi)
# with per-example outcomes the McNemar p is exact: the case again
# (2 examples only the variant gets right on each seed) gives p = 0.125
d = ask("acc", 2, 128, 128, 128, 126, 126, 126, 2, 0, 126, 2, 0)
same("acc exact", d["p_exact"], 1)
close("acc exact issue case", d["mcnemar_p"], stats.binomtest(4, 4).pvalue)
close("acc exact issue case 0.125", d["mcnemar_p"], 0.125)
same("acc exact issue case note", d["note"],
     "seed variance not estimable from 2 seeds")
close("acc exact issue case p", d["p"], 0.125)
# the counts allow 4 discordant pairs; the outcomes may hold more (6 and 2)
d = ask("acc", 2, 128, 128, 128, 126, 126, 125, 3, 1, 125, 3, 1)
close("acc exact mcnemar", d["mcnemar_p"], stats.binomtest(6, 8).pvalue)
same("acc exact discordant", d["discordant"], [6, 2])


# Newcombe's paired interval (1998b, method 10), recomputed from SciPy's
# Wilson intervals and the table's phi
def newcombe_paired(a, b, c, d_):
    n = a + b + c + d_
    w1 = stats.binomtest(a + b, n).proportion_ci(0.95, method="wilson")
    w2 = stats.binomtest(a + c, n).proportion_ci(0.95, method="wilson")
    p1, p2 = (a + b) / n, (a + c) / n
    den = (a + b) * (c + d_) * (a + c) * (b + d_)
    phi = (a * d_ - b * c) / math.sqrt(den) if den > 0 else 0.0
    dl1, du1 = p1 - w1.low, w1.high - p1
    dl2, du2 = p2 - w2.low, w2.high - p2
    return (p1 - p2 - math.sqrt(max(0, dl1**2 - 2*phi*dl1*du2 + du2**2)),
            p1 - p2 + math.sqrt(max(0, du1**2 - 2*phi*du1*dl2 + dl2**2)))


for table in [(36, 12, 2, 0), (200, 30, 10, 16), (0, 0, 0, 50),
              (50, 0, 0, 0), (10, 5, 5, 10)]:
    got = ask("newcombe_paired", *table)
    lo, hi = newcombe_paired(*table)
    close(f"newcombe paired {table} low", got["lo"], lo)
    close(f"newcombe paired {table} high", got["hi"], hi)
    if not -1 <= got["lo"] <= got["hi"] <= 1:
        failures.append(f"newcombe paired {table} leaves [-1, 1]: {got}")
# the accuracy difference with outcomes uses it over the pooled table
d = ask("acc", 2, 128, 128, 128, 126, 126, 126, 2, 0, 126, 2, 0)
lo, hi = newcombe_paired(252, 4, 0, 0)
close("acc exact newcombe paired low", d["lo"], lo)
close("acc exact newcombe paired high", d["hi"], hi)
# each seed's McNemar variance from its own pairs: seed 3's 30 discordant
# pairs (net 0 in expectation) lift the variance above the seeds' spread
ka, kb, m = [100, 101, 100], [95, 95, 96], 128
tri = [(90, 10, 5), (95, 6, 0), (70, 30, 26)]
d = ask("acc", 3, m, *ka, *kb, *[x for t in tri for x in t])
diffs = (np.array(ka) - np.array(kb)) / m
within = np.mean([((b + c) / m - ((b - c) / m) ** 2) / m for _, b, c in tri])
assert within > diffs.var(ddof=1)
close("acc t p, per-seed McNemar variance", d["t_p"],
      2 * stats.t.sf(abs(diffs.mean()) / math.sqrt(within / 3), 2))
# zero variance at n = 3: the spread is below one example
d = ask("acc", 3, 128, 100, 100, 100, 90, 90, 90)
same("acc zero variance note", d["note"],
     "seed spread below one example (1/128): seed variance not estimable")
# all correct on both sides: no difference, p = 1
d = ask("acc", 3, 64, 64, 64, 64, 64, 64, 64)
close("acc all correct diff", d["diff"], 0.0)
close("acc all correct p", d["p"], 1.0)
# all wrong against all right
d = ask("acc", 3, 64, 0, 0, 0, 64, 64, 64)
close("acc all wrong diff", d["diff"], -1.0)
close("acc all wrong low", d["lo"], newcombe(0, 192, 192, 192)[0])
# spread: paired t on per-seed differences, variance no smaller than
# McNemar's from the fewest discordant pairs
ka, kb, m = [100, 110, 96, 104], [90, 92, 95, 80], 128
d = ask("acc", 4, m, *ka, *kb)
diffs = (np.array(ka) - np.array(kb)) / m
within = np.mean([(abs(x) / m - (x / m) ** 2) / m for x in
                  np.array(ka) - np.array(kb)])
v = max(diffs.var(ddof=1), within)
close("acc t p", d["t_p"],
      2 * stats.t.sf(abs(diffs.mean()) / math.sqrt(v / 4), 3))
close("acc t p equals scipy's paired t", d["t_p"],
      stats.ttest_rel(np.array(ka) / m, np.array(kb) / m).pvalue)
# the interval is the seeds' t-interval of that p (it excludes 0 exactly
# when p < 0.05), not Newcombe's over the pooled examples
same("acc interval at the seeds", d["ci_seeds"], 1)
lo, hi = stats.t.interval(0.95, 3, loc=diffs.mean(), scale=math.sqrt(v / 4))
close("acc seed interval low", d["lo"], lo)
close("acc seed interval high", d["hi"], hi)
# Study 2's case: seeds that disagree, an interval the pooled examples
# would make narrow; at the seeds it holds 0 as its p says (p > 0.05)
ka, kb, m = [60, 120, 50, 110, 45], [90, 95, 95, 100, 85], 128
d = ask("acc", 5, m, *ka, *kb)
diffs = (np.array(ka) - np.array(kb)) / m
ref = stats.ttest_rel(np.array(ka) / m, np.array(kb) / m)
close("acc spread t p", d["t_p"], ref.pvalue)
lo, hi = ref.confidence_interval(0.95)
close("acc spread interval low", d["lo"], lo)
close("acc spread interval high", d["hi"], hi)
if not (d["lo"] < 0 < d["hi"]) or newcombe(sum(ka), 5 * m, sum(kb), 5 * m)[1] >= 0:
    failures.append("acc spread: the seeds' interval holds 0 where the "
                    "pooled examples' would not: %r" % d)
# never outside [-1, 1]: near-total differences with a wide spread
d = ask("acc", 3, 128, 128, 128, 30, 0, 0, 128)
same("acc clamped interval at the seeds", d["ci_seeds"], 1)
if not -1 <= d["lo"] <= d["hi"] <= 1:
    failures.append("acc seed interval leaves [-1, 1]: %r" % d)
# where the seed variance is not estimable the interval is the examples'
d = ask("acc", 2, 128, 128, 128, 126, 126)
same("acc n=2 interval over examples", d["ci_seeds"], 0)
# a missing seed is left out of the pairs
d = ask("acc", 4, m, 100, -1, 96, 104, 90, 92, 95, 80)
same("acc missing seed", d["note"], "")
close("acc missing seed diff", d["diff"], np.mean([10, 1, 24]) / m)

# ---- a group's accuracy: an interval at the seeds, never outside [0, 1]
for accs, m in [([0.5, 0.6, 0.55, 0.7], 128), ([0.9, 0.95, 0.99], 64),
                ([0.5, 0.5, 0.5], 128), ([0.99, 1.0, 1.0, 0.98], 256)]:
    got = ask("accint", len(accs), m, *accs)
    x = np.array(accs)
    v = max(x.var(ddof=1), np.mean(x * (1 - x) / m))
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(),
                              scale=math.sqrt(v / len(x)))
    k = sum(round(a * m) for a in accs)
    wlo, whi = stats.binomtest(k, len(accs) * m).proportion_ci(0.95, method="wilson")
    same(f"accuracy interval {accs} at the seeds", got["at_seeds"], 1)
    close(f"accuracy interval {accs} low", got["lo"], max(0.0, min(lo, wlo)))
    close(f"accuracy interval {accs} high", got["hi"], min(1.0, max(hi, whi)))
    if not 0 <= got["lo"] <= got["hi"] <= 1:
        failures.append(f"accuracy interval {accs} leaves [0, 1]: {got}")
# seeds that agree exactly: the examples' variance keeps it from collapsing
got = ask("accint", 3, 128, 0.5, 0.5, 0.5)
if not got["hi"] - got["lo"] > 0.1:
    failures.append(f"accuracy interval of equal seeds collapses: {got}")
# every seed at 0: no spread, no binomial variance; Wilson's over the
# pooled examples keeps it from being a point
got = ask("accint", 3, 128, 0.0, 0.0, 0.0)
wlo, whi = stats.binomtest(0, 384).proportion_ci(0.95, method="wilson")
close("accuracy interval of seeds all at 0: low", got["lo"], 0.0)
close("accuracy interval of seeds all at 0: high", got["hi"], whi)
# one seed: Wilson over its examples
got = ask("accint", 1, 128, 0.75)
lo, hi = stats.binomtest(96, 128).proportion_ci(0.95, method="wilson")
same("accuracy interval of one seed over examples", got["at_seeds"], 0)
close("accuracy interval of one seed low", got["lo"], lo)
close("accuracy interval of one seed high", got["hi"], hi)

# ---- probability of improvement with Clopper-Pearson
got = ask("pi", 5, 0.1, 0.2, 0.3, 0.4, float("nan"),
          0.2, 0.1, 0.4, 0.5, 0.1)
lo, hi = stats.binomtest(3, 4).proportion_ci(0.95, method="exact")
close("prob improvement", got["p"], 0.75)
close("prob improvement low", got["lo"], lo)
close("prob improvement high", got["hi"], hi)

# ---- the t quantile at fractional df
for q, df in [(0.975, 1), (0.975, 2.5), (0.95, 7.3), (0.025, 30)]:
    close(f"t quantile {q} {df}", ask("tq", q, df)["t"],
          stats.t.ppf(q, df), 1e-9)

sys.exit(probe.finish())
