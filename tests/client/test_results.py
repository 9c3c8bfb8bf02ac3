#!/usr/bin/env python3
"""`bifocal results`, `compare` and `report` on a database the real store
wrote (results_fixture), read with --db and through a real bifocald.

Every statistic is recomputed here from the raw tables, independently of the
C code and of the SQL views: means and standard deviations with Python's
statistics module, Student-t quantiles by numerically integrating the t
density (checked against a printed table).

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


def welch(a, b):
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    d = statistics.mean(a) - statistics.mean(b)
    half = t_quantile(0.975, df) * math.sqrt(va + vb)
    return d, d - half, d + half


def paired(a, b):
    s = summary([x - y for x, y in zip(a, b)])
    return s["mean"], s["lo"], s["hi"]


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

rows = json.loads(bifocal("compare", "1", "--db", db, "--format", "json").stdout)
check(len(rows) == 6, "compare: 3 groups x 2 eval depths, got %d rows" % len(rows))
for r in rows:
    key = (r["rope"], r["eval_depth"])
    seeds = sorted(final[key])
    for i, name in [(0, "loss"), (1, "accuracy")]:
        s = summary([final[key][k][i] for k in seeds])
        if name == "accuracy":   # a fraction: its interval is clipped to [0, 1]
            s["lo"], s["hi"] = max(s["lo"], 0.0), min(s["hi"], 1.0)
        for field, want in [("mean", s["mean"]), ("sd", s["sd"]),
                            ("ci_low", s["lo"]), ("ci_high", s["hi"])]:
            check(close(r["%s_%s" % (name, field)], want, 1e-6),
                  "compare %s %s_%s: %s, expected %s" % (key, name, field, r.get(name + "_" + field), want))
    check(r["n"] == len(seeds), "compare %s: n" % (key,))
    t = summary([train[r["rope"]][k] for k in seeds])
    check(close(r["train_loss_mean"], t["mean"], 1e-9) and close(r["train_loss_ci_high"], t["hi"], 1e-6),
          "compare %s: train loss statistics" % (key,))
    if r["rope"] == "rope":
        check("loss_diff" not in r, "the baseline group has no difference")
        continue
    base = final[("rope", r["eval_depth"])]
    if r["rope"] == "spectral":   # same seeds 1..3: paired by seed
        check(r["test"] == "paired", "spectral vs rope pairs by seed")
        d = paired([final[key][k][0] for k in seeds], [base[k][0] for k in seeds])
        da = paired([final[key][k][1] for k in seeds], [base[k][1] for k in seeds])
    else:                         # bifocal lost seed 3: Welch
        check(r["test"] == "welch", "bifocal vs rope uses Welch")
        d = welch([final[key][k][0] for k in seeds], [base[k][0] for k in sorted(base)])
        da = welch([final[key][k][1] for k in seeds], [base[k][1] for k in sorted(base)])
    for got, want in zip([r["loss_diff"], r["loss_diff_ci_low"], r["loss_diff_ci_high"]], d):
        check(close(got, want, 1e-6), "compare %s loss difference %s, expected %s" % (key, got, want))
    for got, want in zip([r["accuracy_diff"], r["accuracy_diff_ci_low"], r["accuracy_diff_ci_high"]], da):
        check(close(got, want, 1e-6), "compare %s accuracy difference %s, expected %s" % (key, got, want))
    base_mean = statistics.mean(v[0] for v in base.values())
    check(close(r["loss_reduction_pct"], -100 * d[0] / base_mean, 1e-9), "loss_reduction_pct")
    check(close(r["loss_reduction_ci_low"], -100 * d[2] / base_mean, 1e-6), "loss_reduction_ci_low")
    excludes = d[1] > 0 or d[2] < 0
    check(r["loss_diff_excludes_zero"] == excludes, "compare %s: the excludes-zero marker" % (key,))
    check(r["verdict"].startswith("rope=%s vs rope=rope, eval depth %d" % key),
          "verdict names the groups and depth: " + r["verdict"])
    pct = -r["loss_reduction_pct"]
    check(("loss %+.3g%%" % pct) in r["verdict"], "verdict carries the loss change: " + r["verdict"])
    check("e+" not in r["verdict"], "percentages never print an exponent: " + r["verdict"])
    check(("beyond seed noise" in r["verdict"].split(";")[0]) == excludes,
          "verdict follows the interval: " + r["verdict"])

# The table: a header, one line per row, the verdict lines; starred changes.
table = bifocal("compare", "1", "--db", db).stdout
check(table.count(" vs rope=rope, eval depth ") == 4, "table lists 4 verdict lines")
check(" *" in table and "± " in table, "table shows mean ± sd and the marker")
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
check(default[("spectral", 10)] == "rope=rope freq_lr_mult=10.0",
      "by default a group's baseline keeps its other fields: %r" % default)
two = baselines("--baseline", "rope=rope,freq_lr_mult=1.0")
check(two[("spectral", 10)] == two[("spectral", 1)] == "rope=rope freq_lr_mult=1.0"
      and two[("rope", 1)] == "(this group)" and two[("rope", 10)] == "rope=rope freq_lr_mult=1.0",
      "--baseline rope=rope,freq_lr_mult=1.0 is every group's baseline: %r" % two)

# --where: only the matching jobs, as if the sweep held no others (rope no
# longer varies, so freq_lr_mult alone groups them).
where = json.loads(bifocal("compare", "3", "--db", db, "--format", "json",
                           "--where", "rope=spectral").stdout)
check(sorted({r["group"] for r in where}) == ["freq_lr_mult=1.0", "freq_lr_mult=10.0"]
      and all(r["n"] == 2 for r in where), "compare --where rope=spectral: %r" % where[:1])
res = json.loads(bifocal("results", "3", "--db", db, "--format", "json",
                         "--where", "rope=spectral,freq_lr_mult=1e1").stdout)
check([(r["config"]["rope"], r["config"]["freq_lr_mult"]) for r in res] == [("spectral", 10.0)] * 2,
      "results --where with two fields, a number written otherwise")
bifocal("report", "3", "--db", db, "--json", "--where", "freq_lr_mult=1",
        "-o", os.path.join(tmp, "where.json"))
rep = json.load(open(os.path.join(tmp, "where.json")))
check(len(rep["jobs"]) == 4, "report --where keeps 4 of 8 jobs: %d" % len(rep["jobs"]))

# ---- the eval_summary view (for sqlite3 users) ---------------------------------

for rope, depth, n, lm, lsd, am, asd in conn.execute(
        "SELECT rope, eval_depth, n, loss_mean, loss_sd, accuracy_mean, accuracy_sd "
        "FROM eval_summary WHERE sweep_id = 1"):
    vals = final[(rope, depth)]
    check(n == len(vals), "eval_summary n")
    check(close(lm, statistics.mean(v[0] for v in vals.values()), 1e-12), "eval_summary loss_mean")
    check(close(lsd, statistics.stdev(v[0] for v in vals.values()), 1e-9), "eval_summary loss_sd")
    check(close(am, statistics.mean(v[1] for v in vals.values()), 1e-12), "eval_summary accuracy_mean")
    check(close(asd, statistics.stdev(v[1] for v in vals.values()), 1e-9), "eval_summary accuracy_sd")

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
check(close(last_rope, statistics.mean(train["rope"].values()), 1e-5),   # 6 digits
      "the curve's last point is the mean final training loss")
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

# ---- errors, each a clear message ----------------------------------------------

def error(args, text):
    p = bifocal(*args, expect=1)
    check(text in p.stderr, "%s: stderr %r lacks %r" % (" ".join(args), p.stderr, text))


error(["compare", "99", "--db", db], "no sweep with id 99")
error(["report", "99", "--db", db], "no sweep with id 99")
error(["compare", "2", "--db", db], "sweep 2 has no succeeded job")
error(["report", "2", "--db", db], "sweep 2 has no succeeded job")
error(["compare", "1", "--db", db, "--by", "lr"], "--by lr: not a field that varies")
error(["compare", "1", "--db", db, "--baseline", "rope=nope"], "no group of sweep 1 has rope=nope")
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
    check([r["sweep_id"] for r in st] == ["1", "2", "3"] and st[0]["failed"] == "1", "status csv")
    wk = json.loads(bifocal("workers", "--format=json", server=server).stdout)
    check(wk[0]["name"] == "fixture-worker", "workers json")
finally:
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=30)

shutil.rmtree(tmp)
finish()
