"""results, compare and report of a big search-shaped sweep (every trial its
own lr, so no two jobs share a config; big_sweeps.search) in memory that
does not grow with its jobs: each run under a data limit (RLIMIT_DATA) far
below what holding the sweep's rows takes (its 60,000 jobs held as rows
took 130 MB, and failed under this limit), its peak resident memory
checked too.

- nothing succeeded: compare and report say "sweep N has no succeeded job
  yet (N job(s); ...)" from the sweep's counts, with --db and through a
  real bifocald, and with --where (which reads the jobs once);
- 30 of the jobs succeeded: compare shows their group, results lists
  every job (CSV and JSON), holding one row at a time;
- a search whose trials all succeeded: up to BF_COMPARE_MAX_GROUPS
  groups compare and report run under the limits; one more is refused by
  name, with how to narrow it, before its rows of numbers grow (4,000
  groups took 62 MB for compare and 91 MB for report before the cap);
- groups keep the order of their first job of any status when those first
  jobs have not succeeded (compare holds only the succeeded ones);
- a wide sweep of 120,000 jobs, 8 in 9 succeeded: compare holds a few
  numbers per succeeded job, not its row (held as rows they took 72 MB,
  over the limit), with --db and through bifocald alike;
- the same in 300 groups (3 ropes times 100 lr values) of 400 seeds:
  compare and report hold a few numbers per succeeded job, report the
  rows of its first 10,000 jobs alone, under a data limit of 64 MB
  (most of it the report's job table) that holding every succeeded row
  ran out of;
- a report grouped by --by over jobs that ran different steps: each job's
  curve is bucketed by its own steps, held by id or not.

Under ASan a data limit cannot be set (its shadow memory counts), so there
the peak resident memory alone is checked, against a bound of its own.

    test_results_memory.py BIFOCAL BIFOCALD RESULTS_FIXTURE
"""
import csv
import io
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import big_sweeps  # noqa: E402
import re  # noqa: E402
from checks import check, finish, start_bifocald  # noqa: E402

BIFOCAL, BIFOCALD, FIXTURE = (sys.argv[1:4] if sys.argv[1] != "--measured"
                               else [sys.argv[4]] * 3)
ASAN = b"libasan" in subprocess.run(["ldd", BIFOCAL], capture_output=True).stdout
JOBS, SUCCEEDED = 60000, 30
# big_sweeps.wide: every 9th job failed.  Under ASan no data limit can be
# set (its shadow memory counts), so the normal build proves the bound at
# 120,000 jobs and the ASan build runs the same paths on fewer.
WIDE = 30000 if ASAN else 120000
# The data a run may use: a few MB suffice now; holding the sweep's rows
# took 130 MB (bifocal at db4b372: 2.1 KB a job).
DATA_LIMIT = 48 << 20
MAX_RSS_KB = 64 * 1024
# The grid sweep: 3 ropes times this many lr values, WIDE / 300 seeds each;
# results/report.c: the jobs its table lists.
GRID_LRS, REPORT_MAX_JOBS = 100, 10000
# Jobs of a sweep with training curves, past the report's first jobs.
STEPS_JOBS = 12600
# The grid's report: its table's rows, read and as JSON, take most of it
# whatever the sweep's size; holding every succeeded row (bifocal at
# 9d0a700) ran out of it.
REPORT_DATA_LIMIT = 64 << 20
ASAN_MAX_RSS_KB = 160 * 1024


def measured(limit, fd, cmd):
    """Runs cmd under the data limit (0: none) and exits with its status,
    having written its peak resident memory (KB) on fd.  A process of
    its own, started small: a child forked from this test's process would
    count the test's memory as its own until it runs bifocal."""
    pid = os.fork()
    if pid == 0:
        if limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        os.execv(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    os.write(fd, b"%d" % usage.ru_maxrss)
    sys.exit(os.waitstatus_to_exitcode(status))


def bifocal(*args, server=None, expect=0, limit=DATA_LIMIT,
            asan_rss_kb=ASAN_MAX_RSS_KB):
    """Runs bifocal under the bound (limit: its data); its stdout and
    stderr."""
    cmd = [BIFOCAL] + (["--server", server[0], "--token-file", server[1]]
                       if server else []) + list(args)
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16"
    read_rss, write_rss = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.run([sys.executable, __file__, "--measured",
                            str(0 if ASAN else limit), str(write_rss)]
                           + cmd, stdout=out, stderr=err, env=env,
                           pass_fds=(write_rss,))
        os.close(write_rss)
        rss = int(os.read(read_rss, 64) or b"-1")
        os.close(read_rss)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    what = " ".join(args) + (" (through bifocald)" if server else "")
    check(p.returncode == expect, "%s: exit %d, expected %d; stderr: %s"
          % (what, p.returncode, expect, stderr[-2000:]))
    bound = asan_rss_kb if ASAN else MAX_RSS_KB
    check(0 < rss <= bound, "%s: peak RSS %d KB, over %d KB" % (what, rss, bound))
    print("%s: peak RSS %d KB" % (what, rss))
    return stdout, stderr


if sys.argv[1] == "--measured":
    measured(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
tmp = tempfile.mkdtemp(prefix="bifocal-memory-")
db = os.path.join(tmp, "search.db")
subprocess.run([FIXTURE, db], check=True)
pending = big_sweeps.search(db, JOBS, 0)
some = big_sweeps.search(db, JOBS, SUCCEEDED)
none_yet = "sweep %d has no succeeded job yet (%d job(s); see bifocal results %d)" \
    % (pending, JOBS, pending)

# Nothing succeeded: said before any job is read.
for args in [["compare", str(pending)], ["report", str(pending), "--json", "-o",
                                          os.path.join(tmp, "r.json")],
             ["compare", str(pending), "--where", "task=dyck"]]:
    _, err = bifocal(*args, "--db", db, expect=1)
    check(none_yet in err, "%s says %r, not %r" % (" ".join(args), none_yet, err))

# 30 succeeded: their group of 3 seeds per trial, every job listed.
out, _ = bifocal("compare", str(some), "--format", "json", "--db", db)
rows = json.loads(out or "[]")
check(len(rows) > 0 and sum(r["n"] for r in rows) == SUCCEEDED * len({r["eval_depth"] for r in rows}),
      "compare of %d succeeded jobs: rows of their groups, not %s" % (SUCCEEDED, out[:300]))
out, _ = bifocal("results", str(some), "--format", "csv", "--db", db)
listed = list(csv.DictReader(io.StringIO(out)))
check(len(listed) == JOBS, "results lists %d jobs, not %d" % (JOBS, len(listed)))
check(sum(r["status"] == "succeeded" for r in listed) == SUCCEEDED,
      "results lists the %d succeeded jobs" % SUCCEEDED)
check(len({r["lr"] for r in listed}) == JOBS // 3 + (JOBS % 3 > 0),
      "results shows each trial's lr (it varies)")
out, _ = bifocal("results", str(some), "--format", "json", "--db", db)
whole = json.loads(out or "[]")
check(len(whole) == JOBS and all(isinstance(r.get("config"), dict) for r in whole),
      "results --format json gives every row whole, its config parsed")

# A search whose trials all succeeded: every trial is a group.  At the cap
# compare and report run within the limits; past it they refuse.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "../../results/compare.h")) as f:
    MAX_GROUPS = int(re.search(r"#define BF_COMPARE_MAX_GROUPS (\d+)",
                               f.read()).group(1))
at_cap = big_sweeps.search(db, 3 * MAX_GROUPS, 3 * MAX_GROUPS)
out, _ = bifocal("compare", str(at_cap), "--format", "json", "--db", db)
check(len({r["group"] for r in json.loads(out or "[]")}) == MAX_GROUPS,
      "compare at the cap: %d groups" % MAX_GROUPS)
report_path = os.path.join(tmp, "at_cap.json")
# (under ASan 2,048 groups' rows and labels, with its shadow and
# quarantine, peaked at 201,296 KB; the normal build's data limit is the bound)
bifocal("report", str(at_cap), "--json", "-o", report_path, "--db", db,
        limit=REPORT_DATA_LIMIT, asan_rss_kb=320 * 1024)
with open(report_path) as f:
    check(len(json.load(f)["groups"]) == MAX_GROUPS, "report at the cap")
past_cap = big_sweeps.search(db, 3 * 4000, 3 * 4000)
refusal = "sweep %d: more than %d groups have a succeeded job (grouped by lr)" \
    % (past_cap, MAX_GROUPS)
for args in [["compare", str(past_cap)],
             ["report", str(past_cap), "--json", "-o", report_path]]:
    _, err = bifocal(*args, "--db", db, expect=1)
    check(refusal in err and "--where stage=NAME" in err,
          "%s past the cap: %r" % (args[0], err[-300:]))

# Groups in the order of their first job: the first two jobs (rope and
# spectral, seed 1) have not succeeded, so the first succeeded job is
# bifocal's; compare still lists rope, spectral, bifocal.
wide = big_sweeps.wide(db, 300, lean=True)
c = sqlite3.connect(db)
c.execute("UPDATE jobs SET status = 'queued' WHERE sweep_id = ? AND idx < 2", (wide,))
c.commit()
c.close()
out, _ = bifocal("compare", str(wide), "--format", "json", "--db", db)
order = []
for r in json.loads(out or "[]"):
    if r["rope"] not in order:
        order.append(r["rope"])
check(order == ["rope", "spectral", "bifocal"],
      "groups in order of their first job, not %s" % order)

# Most jobs succeeded: each one's seed, losses and accuracies held, not its
# row (bifocal at cbdd802: ~600 bytes a job, 72 MB here).
many = big_sweeps.wide(db, WIDE, lean=True)
out, _ = bifocal("compare", str(many), "--format", "json", "--db", db)
wide_rows = json.loads(out or "[]")
depths = {r["eval_depth"] for r in wide_rows}
check(len(wide_rows) == 3 * len(depths) > 0
      and sum(r["n"] for r in wide_rows) == (WIDE - WIDE // 9) * len(depths),
      "compare of the wide sweep: 3 groups of every succeeded seed, not %s"
      % out[:300])
check(all(r.get("n_paired") for r in wide_rows if r["rope"] != "rope"),
      "each rope is paired with rope on their shared seeds")

# Every job with results, in many groups of several seeds each (the wide
# sweep's ropes times GRID_LRS values of lr): compare and report hold a
# few numbers per succeeded job; report keeps the rows of its first
# BF_REPORT_MAX_JOBS jobs alone (bifocal at 9d0a700 held every succeeded
# job's row, and ran out of the limit here).
grid = big_sweeps.wide(db, WIDE, lean=True)
c = sqlite3.connect(db)
c.execute("UPDATE jobs SET config = json_set(config, '$.lr', "
          "0.001 + (idx / 3 % ?1) * 1e-6) WHERE sweep_id = ?2", (GRID_LRS, grid))
c.commit()
c.close()
succeeded = WIDE - WIDE // 9
out, _ = bifocal("compare", str(grid), "--format", "json", "--db", db)
grid_rows = json.loads(out or "[]")
depths = {r["eval_depth"] for r in grid_rows}
check(len(grid_rows) == 3 * GRID_LRS * len(depths) > 0
      and sum(r["n"] for r in grid_rows) == succeeded * len(depths),
      "compare of the grid: %d groups of every succeeded seed, not %s"
      % (3 * GRID_LRS, out[:300]))
check(all(r.get("n_paired") for r in grid_rows if r["rope"] != "rope"),
      "each rope is paired with rope at its lr on their shared seeds")
report_path = os.path.join(tmp, "grid.json")
bifocal("report", str(grid), "--json", "-o", report_path, "--db", db,
        limit=REPORT_DATA_LIMIT)
report = {}
if os.path.exists(report_path):     # not when it ran out of memory
    with open(report_path) as f:
        report = json.load(f)
groups = report.get("groups", [])
check(len(groups) == 3 * GRID_LRS
      and sum(g["jobs"] for g in groups) == WIDE
      and sum(g["succeeded"] for g in groups) == succeeded,
      "report counts every group's jobs: %s" % json.dumps(groups[:3]))
jobs = report.get("jobs", [])
check(len(jobs) == min(WIDE, REPORT_MAX_JOBS)
      and [j["job_id"] for j in jobs] == sorted(j["job_id"] for j in jobs),
      "report lists the first %d jobs" % REPORT_MAX_JOBS)
check([(r["group"], r["eval_depth"], r["n"]) for r in report.get("compare", [])]
      == [(r["group"], r["eval_depth"], r["n"]) for r in grid_rows],
      "report's comparison has compare's rows")

# Past the report's first jobs a succeeded job is held by id, its curves
# read with its group's first row: a job whose steps differ from that
# row's (here grouped together by --by rope) must keep its own, so that
# its points fall in the buckets of its own run.
steps = big_sweeps.wide(db, STEPS_JOBS)
c = sqlite3.connect(db)
c.execute("UPDATE jobs SET config = json_set(config, '$.steps', "
          "json_extract(config, '$.steps') * 2) WHERE sweep_id = ?1 "
          "AND seed > ?2", (steps, STEPS_JOBS // 3 - 200))
c.commit()
c.close()
report_path = os.path.join(tmp, "steps.json")
bifocal("report", str(steps), "--by", "rope", "--json", "-o", report_path,
        "--db", db)
with open(report_path) as f:
    curves = json.load(f)["train_loss"]
rope = [c["n"] for c in curves if c["group"] == 0]
check(rope and {200, STEPS_JOBS // 3 - 200} <= set(rope[0]),
      "rope's curve: buckets of the 200 jobs of twice the steps alone and "
      "of the others alone, not %s" % rope)

# Through a real bifocald: its status request gives the counts.
ddb = os.path.join(tmp, "daemon.db")
shutil.copy(db, ddb)
daemon, server = start_bifocald(BIFOCALD, ddb, tmp)
try:
    _, err = bifocal("compare", str(pending), server=server, expect=1)
    check(none_yet in err, "compare through bifocald says %r, not %r" % (none_yet, err))
    out, _ = bifocal("compare", str(some), "--format", "json", server=server)
    check(json.loads(out or "null") == rows, "compare through bifocald equals --db")
    out, _ = bifocal("compare", str(many), "--format", "json", server=server)
    check(json.loads(out or "null") == wide_rows,
          "compare of the wide sweep through bifocald equals --db")
    _, err = bifocal("compare", "99", server=server, expect=1)
    check("99" in err, "an unknown sweep is named: %r" % err)
finally:
    daemon.terminate()
    daemon.wait()
shutil.rmtree(tmp)
finish("results, compare and report of a %d-job sweep in bounded memory" % JOBS)
