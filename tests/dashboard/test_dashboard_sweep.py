"""The dashboard's sweep data over real HTTP against the fixture database
(a real SQLite file the store wrote), recomputed here with Python's sqlite3:

- the job table is paged: every sort (job id, status, each varying field,
  seed; ascending and descending) read page by page gives the jobs in the
  order computed here (ties by job id), and every filter (status, each
  field's values, combined) gives exactly the matching jobs, with the
  matching total;
- bad page parameters are refused by name (400);
- a trainer's parameter (sweep 8's params.width) groups, sorts and filters
  as any field;
- one engine: for every sweep of the fixture (searched, staged, adaptive,
  zipped, params) the dashboard's comparison is `bifocal compare --format
  json`'s, row for row and field for field (numbers as the dashboard
  sends them, at 7 significant digits), its groups those of compare's rows;
- the aggregates follow the jobs: after job statuses change in the database
  (written here, while the dashboard runs), /live's counts, the groups'
  counts and the comparison equal a full recount (bifocal compare --db).

    test_dashboard_sweep.py BIFOCAL RESULTS_FIXTURE
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

STATUSES = ["waiting", "queued", "running", "succeeded", "failed", "cancelled"]
# checks.py lives beside the results tests (tests/results/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'results'))
import checks  # noqa: E402
from checks import check  # noqa: E402
checks.print_passes = True   # the test's log lists what held, too


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get_ready(port, path):
    """GET path until the sweep's aggregates are loaded (not "pending")."""
    for _ in range(600):
        status, body = get(port, path)
        if status != 200 or not body.get("pending"):
            return status, body
        time.sleep(0.05)
    raise RuntimeError("%s stayed pending" % path)


def start_dashboard(bifocal, db, d):
    port_file = os.path.join(d, "dash.port")
    log = open(port_file + ".log", "w")
    proc = subprocess.Popen([bifocal, "dashboard", "--db", db, "--listen",
                             "127.0.0.1:0", "--port-file", port_file],
                            stdout=log, stderr=log)
    for _ in range(200):
        if os.path.exists(port_file):
            return proc, int(open(port_file).read())
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the dashboard did not start: " + open(log.name).read())


# ---- the job table -------------------------------------------------------------

def jobs_of(ro, sweep):
    rows = ro.execute("SELECT job_id, status, seed, config FROM jobs"
                      " WHERE sweep_id = ? ORDER BY job_id", (sweep,)).fetchall()
    return [dict(job_id=j, status=s, seed=seed, config=json.loads(c))
            for j, s, seed, c in rows]


def config_value(job, field):
    """A config field's value; a trainer's parameter params.NAME is NAME
    of the config's params object (docs/job-config.md)."""
    if field.startswith("params."):
        return job["config"].get("params", {}).get(field[len("params."):])
    return job["config"].get(field)


def value_of(job, field):
    if field == "status":
        return STATUSES.index(job["status"])
    if field in ("job_id", "seed"):
        return job[field]
    v = config_value(job, field)
    # numbers before strings, as JSON types order (a field holds one type)
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def expected_order(jobs, sort, desc):
    order = sorted(jobs, key=lambda j: (value_of(j, sort), j["job_id"]))
    ids = [j["job_id"] for j in order]
    return ids[::-1] if desc else ids


def read_pages(port, sweep, query, limit):
    ids, offset, total = [], 0, None
    while True:
        status, p = get(port, "/api/sweeps/%d/jobs?%s&offset=%d&limit=%d"
                        % (sweep, query, offset, limit))
        if status != 200:
            return None, None
        total = p["total"]
        ids += [r["job_id"] for r in p["jobs"]]
        check(len(p["jobs"]) <= limit, "a page holds at most its limit")
        offset += limit
        if offset >= total:
            return ids, total


def check_paging(port, ro, sweep):
    _, summary = get_ready(port, "/api/sweeps/%d" % sweep)
    varying = summary["varying"]
    jobs = jobs_of(ro, sweep)
    for sort in ["job_id", "status"] + varying:
        for desc in (0, 1):
            ids, total = read_pages(port, sweep, "sort=%s&desc=%d" % (sort, desc), 2)
            check(ids == expected_order(jobs, sort, desc) and total == len(jobs),
                  "sweep %d sorted by %s%s, 2 a page: %s" % (
                      sweep, sort, " desc" if desc else "", ids))
    filters = [("status", s) for s in STATUSES] + [
        (f, v) for f in varying for v in summary["values"][f]]
    for field, value in filters:
        want = [j["job_id"] for j in jobs if
                (j["status"] == value if field == "status" else
                 (j["seed"] if field == "seed" else config_value(j, field)) == value)]
        text = value if field == "status" else json.dumps(value)
        ids, total = read_pages(port, sweep, "%s=%s" % (
            field, urllib.parse.quote(text)), 3)
        check(ids == want and total == len(want),
              "sweep %d filtered by %s=%s: %s" % (sweep, field, text, ids))
    # two filters at once, sorted by seed descending
    f = varying[0]
    v = summary["values"][f][0]
    want = [j for j in jobs if config_value(j, f) == v and j["status"] == "succeeded"]
    ids, total = read_pages(port, sweep, "%s=%s&status=succeeded&sort=seed&desc=1"
                            % (f, urllib.parse.quote(json.dumps(v))), 2)
    check(ids == expected_order(want, "seed", 1) and total == len(want),
          "sweep %d: %s=%s and succeeded, by seed descending" % (sweep, f, v))


def check_bad_pages(port):
    for query, word in [("sort=nope", "sort"), ("nope=1", "'nope'"),
                        ("status=done", "'status'"), ("limit=0", "'limit'"),
                        ("limit=100000", "'limit'"), ("offset=-1", "'offset'"),
                        ("desc=2", "'desc'")]:
        status, body = get(port, "/api/sweeps/1/jobs?" + query)
        check(status == 400 and word in body.get("error", ""),
              "jobs?%s: 400 naming %s (%s)" % (query, word, body.get("error")))


# ---- the aggregates follow the jobs --------------------------------------------

def recount(ro, sweep):
    counts = dict(ro.execute("SELECT status, count(*) FROM jobs WHERE sweep_id = ?"
                             " GROUP BY status", (sweep,)).fetchall())
    return {s: counts.get(s, 0) for s in STATUSES}


def group_recount(ro, sweep, field):
    out = {}
    for config, status in ro.execute("SELECT config, status FROM jobs"
                                     " WHERE sweep_id = ?", (sweep,)):
        g = out.setdefault(config_value({"config": json.loads(config)}, field),
                           [0, 0])
        g[0] += 1
        g[1] += status == "succeeded"
    return out


def check_param_groups(port, ro):
    """Sweep 8's groups are its params.width values, counted as here."""
    _, s = get_ready(port, "/api/sweeps/8")
    groups = {g["fields"].get("params.width"): [g["jobs"], g["succeeded"]]
              for g in s["groups"]}
    check(groups == group_recount(ro, 8, "params.width"),
          "sweep 8 grouped by params.width: %s" % groups)


def same(mine, theirs):
    """Whether the dashboard's JSON (numbers at JSON_REAL_PRECISION(7))
    says what compare's says; the first difference, or None."""
    if isinstance(mine, float) or isinstance(theirs, float):
        ok = (isinstance(mine, (int, float)) and isinstance(theirs, (int, float))
              and abs(mine - theirs) <= 1e-6 * max(abs(mine), abs(theirs)))
        return None if ok else "%r against %r" % (mine, theirs)
    if isinstance(mine, dict) and isinstance(theirs, dict):
        if mine.keys() != theirs.keys():
            return "fields %s against %s" % (sorted(mine), sorted(theirs))
        for k in mine:
            why = same(mine[k], theirs[k])
            if why:
                return "%s: %s" % (k, why)
        return None
    if isinstance(mine, list) and isinstance(theirs, list):
        if len(mine) != len(theirs):
            return "%d rows against %d" % (len(mine), len(theirs))
        for i, (a, b) in enumerate(zip(mine, theirs)):
            why = same(a, b)
            if why:
                return "[%d] %s" % (i, why)
        return None
    return None if mine == theirs else "%r against %r" % (mine, theirs)


def compare_json(bifocal, db, sweep):
    r = subprocess.run([bifocal, "compare", str(sweep), "--db", db,
                        "--format", "json"], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else []


def check_same_as_compare(port, bifocal, db):
    """The dashboard's comparison of every fixture sweep is compare's."""
    for sweep in range(1, 10):
        _, s = get_ready(port, "/api/sweeps/%d" % sweep)
        for _ in range(300):     # the comparison follows the outline
            if s.get("compare") is not None:
                break
            time.sleep(0.05)
            _, s = get(port, "/api/sweeps/%d" % sweep)
        theirs = compare_json(bifocal, db, sweep)
        why = same(s.get("compare"), theirs)
        check(why is None, "sweep %d: the dashboard's comparison is compare's"
              " (%s)" % (sweep, why or "%d rows" % len(theirs)))
        labels = {g["label"] for g in s["groups"]}
        check({r["group"] for r in theirs} <= labels,
              "sweep %d: compare's groups are the dashboard's: %s"
              % (sweep, sorted(labels)))
    _, s = get(port, "/api/sweeps/9")
    rules = [r for r in s["compare"] if r.get("stopping_rule")]
    check(len(rules) == 1 and rules[0]["stopping_rule"].get("state") == "lower",
          "sweep 9: the stopping rule's verdict on its confirm comparison: %r"
          % [r.get("stopping_rule") for r in rules])


def agrees(port, ro, bifocal, db):
    _, live = get(port, "/api/sweeps/1/live")
    counts = live.get("counts") or {}
    if {s: counts.get(s) for s in STATUSES} != recount(ro, 1):
        return "live counts %s, recount %s" % (counts, recount(ro, 1))
    _, s = get(port, "/api/sweeps/1")
    groups = {g["fields"]["rope"]: [g["jobs"], g["succeeded"]] for g in s["groups"]}
    if groups != group_recount(ro, 1, "rope"):
        return "groups %s, recount %s" % (groups, group_recount(ro, 1, "rope"))
    if s["compare"] is None:     # a sweep just read: its outline first
        return "the comparison is not computed yet"
    why = same(s["compare"], compare_json(bifocal, db, 1))
    return "compare: %s" % why if why else None


def check_taken_values(port):
    """Sweep 6's confirm stage took each cell's tuned lr (from: "stage:tune"),
    different per cell: the dashboard groups it by rope alone, as compare
    and the report do (results/sweep_view.h)."""
    _, s = get_ready(port, "/api/sweeps/6")
    confirm = sorted((g["label"], g["jobs"]) for g in s["groups"]
                     if g["fields"].get("stage") == "confirm")
    check(confirm == [("stage=confirm rope=rope", 3),
                      ("stage=confirm rope=spectral", 3)],
          "sweep 6's confirm groups: %r" % confirm)
    # its tune stage searches: trials, as compare shows them, no verdicts
    tune = [r for r in s.get("compare") or [] if "stage=tune" in r["group"]]
    check(tune and all(r.get("search_trial") and "verdict" not in r
                       for r in tune),
          "sweep 6's tune trials are no comparisons: %r"
          % [(r["group"], r.get("compared")) for r in tune])


def check_changes(port, bifocal, db):
    rw = sqlite3.connect(db)
    ro = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    rounds = [[(2, "queued"), (4, "running")],
              [(2, "running"), (4, "failed"), (9, "queued")],
              [(2, "succeeded"), (9, "cancelled"), (1, "queued")]]
    for n, changes in enumerate(rounds, 1):
        with rw:
            for job, status in changes:
                rw.execute("UPDATE jobs SET status = ? WHERE job_id = ?", (status, job))
        why = "never polled"
        for _ in range(300):     # the refresher reads the feed every 250 ms
            why = agrees(port, ro, bifocal, db)
            if why is None:
                break
            time.sleep(0.1)
        check(why is None, "after change round %d %s: counts, groups and the "
              "comparison equal a full recount (%s)" % (n, changes, why))
    rw.close()
    ro.close()


def main():
    bifocal, fixture = sys.argv[1:3]
    d = tempfile.mkdtemp(prefix="bf-dash-sweep-")
    try:
        db = os.path.join(d, "fixture.db")
        subprocess.run([fixture, db], check=True, capture_output=True)
        proc, port = start_dashboard(bifocal, db, d)
        try:
            ro = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
            for sweep in (1, 3, 8):     # 8: params.width
                check_paging(port, ro, sweep)
            check_param_groups(port, ro)
            ro.close()
            check_bad_pages(port)
            check_taken_values(port)
            check_same_as_compare(port, bifocal, db)
            check_changes(port, bifocal, db)
        finally:
            proc.terminate()
            rc = proc.wait(timeout=30)
        # under ASan a leak or a race's damage makes the exit status nonzero
        check(rc == 0, "the dashboard stopped cleanly on SIGTERM (exit %d): %s"
              % (rc, open(os.path.join(d, "dash.port.log")).read()[-3000:]))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    checks.finish("dashboard sweep data: ok")


main()
