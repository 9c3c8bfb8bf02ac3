"""results, compare and report through a real bifocald on sweeps whose rows
fill many frames: 30,000 jobs (a job row is ~1 KB of JSON: the whole sweep
is twice the 16 MiB a frame may hold) and 3 jobs of 1,000,000 logged steps
each.  They must print what --db FILE prints, and the daemon must hold a
page at a time: two reports of the 3,000,000 loss rows at once leave its
peak resident memory far below what the rows take (it used to build the
whole reply, 2 GB a report, and aborted under a 3 GB limit).

    test_results_paged.py BIFOCAL BIFOCALD RESULTS_FIXTURE
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import big_sweeps  # noqa: E402
from checks import bifocal_runner, check, finish, start_bifocald  # noqa: E402

BIFOCAL, BIFOCALD, FIXTURE = sys.argv[1:4]
WIDE_JOBS = 30000
LONG_JOBS, LONG_STEPS = 3, 1000000
# The daemon's peak resident memory after two concurrent reports of the long
# sweep.  Its rows are ~200 MB as JSON text and ~2 GB as JSON objects.
MAX_DAEMON_RSS_KB = 200 * 1024
SMALL_STACK = 512 * 1024

bifocal = bifocal_runner(BIFOCAL, timeout=600)


def load_report(path):
    """The report's data, less the time it was made (None if unreadable)."""
    try:
        data = json.load(open(path))
    except (OSError, ValueError):
        return None
    data.pop("generated", None)
    return data


def report_json(sweep, path, server=None):
    args = ["report", str(sweep), "--json", "-o", path] + ([] if server else ["--db", db])
    bifocal(*args, server=server)
    return load_report(path)


def peak_rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


tmp = tempfile.mkdtemp(prefix="bifocal-paged-")
db = os.path.join(tmp, "big.db")
subprocess.run([FIXTURE, db], check=True)
wide = big_sweeps.wide(db, WIDE_JOBS)
long_sweep = big_sweeps.long(db, LONG_JOBS, LONG_STEPS)

ddb = os.path.join(tmp, "daemon.db")
shutil.copy(db, ddb)
env = dict(os.environ)
# Under ASan freed pages wait in its quarantine (256 MB by default): keep it
# small, so that the peak measures what the daemon holds.
env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16"
daemon, server = start_bifocald(BIFOCALD, ddb, tmp, env=env)
try:

    # 30,000 jobs: every command prints what --db prints.
    outputs = {}
    for args in [["results", str(wide), "--format", "json"],
                 ["compare", str(wide), "--format", "json"]]:
        via = outputs[args[0]] = bifocal(*args, server=server).stdout
        check(via == bifocal(*(args + ["--db", db])).stdout,
              "%s through the daemon equals --db" % " ".join(args))
    try:
        rows = json.loads(outputs["results"])
    except ValueError:
        rows = []
    check(len(rows) == WIDE_JOBS and [r["job_id"] for r in rows] == sorted(r["job_id"] for r in rows),
          "results lists all %d jobs once, in order (got %d)" % (WIDE_JOBS, len(rows)))
    # A cell of many seeds (10,000 here) is compared on the heap: with its
    # arrays on the stack, compare died of SIGSEGV on a 512 KiB stack (and
    # on the default 8 MiB one at a 1,000,000-job sweep's ~333,000 seeds).
    def small_stack():
        resource.setrlimit(resource.RLIMIT_STACK, (SMALL_STACK, SMALL_STACK))
    p = subprocess.run([BIFOCAL, "compare", str(wide), "--format", "json", "--db", db],
                       capture_output=True, text=True, preexec_fn=small_stack)
    check(p.returncode == 0 and p.stdout == outputs["compare"],
          "compare of %d seeds a cell on a %d KiB stack: exit %d, %s" %
          (WIDE_JOBS // 3, SMALL_STACK // 1024, p.returncode,
           "same output" if p.stdout == outputs["compare"] else "other output"))
    check(report_json(wide, os.path.join(tmp, "w.json"), server)
          == report_json(wide, os.path.join(tmp, "wdb.json")),
          "report of %d jobs through the daemon equals --db" % WIDE_JOBS)

    # 1,000,000 steps a job, two reports at once.
    before = peak_rss_kb(daemon.pid)
    cmd = [BIFOCAL, "--server", server[0], "--token-file", server[1], "report",
           str(long_sweep), "--json", "-o"]
    both = [subprocess.Popen(cmd + [os.path.join(tmp, "l%d.json" % i)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
    for p in both:
        out, err = p.communicate(timeout=600)
        check(p.returncode == 0, "concurrent report of the long sweep: exit %d: %s"
              % (p.returncode, err[-2000:]))
    peak = peak_rss_kb(daemon.pid)
    print("daemon peak RSS: %d kB before, %d kB after two reports of %d loss rows"
          % (before, peak, LONG_JOBS * LONG_STEPS))
    check(0 < peak < MAX_DAEMON_RSS_KB,
          "daemon peak RSS %d kB, bound %d kB" % (peak, MAX_DAEMON_RSS_KB))
    via = load_report(os.path.join(tmp, "l0.json"))
    check(via is not None and via == report_json(long_sweep, os.path.join(tmp, "ldb.json")),
          "report of %d-step jobs through the daemon equals --db" % LONG_STEPS)
    check(via is not None and load_report(os.path.join(tmp, "l1.json")) == via,
          "both concurrent reports got the whole sweep")
    check(daemon.poll() is None, "the daemon is still up")

    # --where with an empty pair filters nothing: refused, by the daemon's
    # client as by --db.
    for where in [",", "", "rope=rope,"]:
        p = bifocal("results", str(wide), "--where", where, server=server, expect=1)
        check("expected FIELD=VALUE[,...]" in p.stderr and "an empty pair" in p.stderr,
              "--where %r is refused: %r" % (where, p.stderr))
finally:
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)

shutil.rmtree(tmp)
finish()
