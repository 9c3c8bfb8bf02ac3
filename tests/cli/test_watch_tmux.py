#!/usr/bin/env python3
"""`bifocal watch` driven in real terminals: tmux panes 60 and 200 columns
wide watch the same sweep of a real bifocald while fake workers (the wire
protocol spoken by hand, tests/cli/wire_peer.py) move its jobs: running
lines longer than 60 columns, a loss that gets shorter, jobs that end so
their lines must go.  After every change each pane must show exactly the
expected frame: the sweep's bar line, one line per running job, cut to the
width, nothing below; any stale fragment of an older, longer frame fails.
Also: "0 workers connected" before a worker connects, plain lines into a
file (no escape codes), and the exit status 1 with the failed job listed.

usage: test_watch_tmux.py BIFOCAL BIFOCALD
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_peer import Daemon, FakeWorker  # noqa: E402

BIFOCAL, BIFOCALD = sys.argv[1], sys.argv[2]
WIDTHS = (60, 200)
STEPS = 1000
BAR = 30
# Binary fractions: they print the same from C and from Python (labels
# at 4 significant digits, %.4g).
LRS = ["0.0001220703125", "0.0009765625", "0.00048828125"]

SWEEP = """name: watch-tmux
base: {task: dyck, steps: %d, d_model: 32, n_heads: 4, n_layers: 1,
       seq_len: 40, batch_size: 8}
grid:
  lr: [%s]
seeds: 2
max_attempts: 1
""" % (STEPS, ", ".join(LRS))


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class Panes:
    """One tmux server of our own (-L), one session per width."""

    def __init__(self, d, command):
        if not shutil.which("tmux"):
            fail("tmux is not installed (scripts/deps.sh TEST_PKGS)")
        self.server = "bf-watch-%d" % os.getpid()
        self.d = d
        for w in WIDTHS:
            exit_file = os.path.join(d, "exit-%d" % w)
            self.tmux("new-session", "-d", "-s", "w%d" % w, "-x", str(w),
                      "-y", "20", "%s; echo $? > %s; sleep 600"
                      % (command, exit_file))

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.server] + list(args),
                              check=True, capture_output=True,
                              text=True).stdout

    def screen(self, width):
        return self.tmux("capture-pane", "-p", "-t", "w%d" % width).split("\n")

    def exit_status(self, width):
        path = os.path.join(self.d, "exit-%d" % width)
        return int(open(path).read()) if os.path.exists(path) else None

    def close(self):
        subprocess.run(["tmux", "-L", self.server, "kill-server"],
                       capture_output=True)


ETA = r"ETA (\?|[0-9]+h[0-9]{2}m|[0-9]+m[0-9]{2}s|[0-9]+\.[0-9]s)"


def matches(line, prefix, width):
    """line is prefix + "ETA x", cut to width - 1 columns if longer (a
    terminal shows no trailing blanks)."""
    cut = width - 1
    if len(line) <= len(prefix):
        return len(prefix) >= cut and line == prefix[:cut].rstrip()
    rest = line[len(prefix):]
    if not line.startswith(prefix) or len(line) > cut:
        return False
    if re.fullmatch(ETA, rest):
        return True
    # cut inside the ETA: rest is the start of some ETA text
    return len(line) >= cut - 1 and re.fullmatch(r"E(T(A( [0-9hms.?]*)?)?)?",
                                                  rest)


def expected_frame(state):
    """The lines of a frame without their ETA values, and the hint."""
    ended = state["succeeded"] + state["failed"]
    filled = BAR * ended // 6
    lines = ["sweep 1 [%s] %d/6  running %d  queued %d  failed %d  "
             % ("#" * filled + "." * (BAR - filled), ended,
                len(state["running"]), state["queued"], state["failed"])]
    for job in sorted(state["running"]):
        r = state["running"][job]
        lines.append("  job %d lr=%s seed=%d  step %d/%d  loss %s  "
                     % (job, r["lr"], r["seed"], r["step"], STEPS,
                        "%.4g" % r["loss"] if r["loss"] is not None else "-"))
    return lines


def frame_ok(screen, state, width, hint):
    want = expected_frame(state)
    rows = [r.rstrip() for r in screen]
    if len(rows) < len(want) + bool(hint):
        return "screen too short"
    for i, prefix in enumerate(want):
        if not matches(rows[i], prefix, width):
            return "row %d is %r, expected %r + ETA" % (i, rows[i], prefix)
    at = len(want)
    if hint:
        full = hint[:width - 1]
        if rows[at] != full:
            return "row %d is %r, expected the hint %r" % (at, rows[at], full)
        at += 1
    for i in range(at, len(rows)):
        if rows[i]:
            return "row %d should be blank (a stale fragment?): %r" % (i, rows[i])
    return None


def wait_frame(panes, state, hint=None):
    for width in WIDTHS:
        problem = "never drawn"
        for _ in range(60):
            problem = frame_ok(panes.screen(width), state, width, hint)
            if problem is None:
                break
            time.sleep(0.1)
        if problem:
            print("\n".join(panes.screen(width)), file=sys.stderr)
            fail("%d columns: %s" % (width, problem))


def main():
    d = tempfile.mkdtemp(prefix="bf-watch-tmux-")
    daemon = panes = plain = None
    try:
        daemon = Daemon(BIFOCALD, d)
        sweep_file = os.path.join(d, "sweep.yaml")
        open(sweep_file, "w").write(SWEEP)
        client = [BIFOCAL, "--server", daemon.addr, "--token-file",
                  daemon.token_file]
        subprocess.run(client + ["submit", sweep_file], check=True,
                       capture_output=True)
        watch = " ".join("'%s'" % a for a in client + ["watch", "1"])
        panes = Panes(d, watch)
        plain_out = open(os.path.join(d, "plain.txt"), "w")
        plain = subprocess.Popen(client + ["watch", "1"], stdout=plain_out,
                                 stderr=subprocess.STDOUT)

        state = {"running": {}, "queued": 6, "succeeded": 0, "failed": 0}
        # No worker yet: after the grace period the watch says so.
        hint = ("0 workers connected: start one with: mpirun -np 2 "
                "bifocal-worker --server %s --token-file %s"
                % (daemon.addr, daemon.token_file))
        time.sleep(3.5)
        wait_frame(panes, state, hint)

        w1, w2 = FakeWorker(daemon, name="w1"), FakeWorker(daemon, name="w2")

        def lease(w):
            w.lease()
            state["queued"] -= 1
            state["running"][w.job] = {"lr": "%.4g" % float(LRS[(w.job - 1) // 2]),
                                       "seed": w.config["seed"], "step": 0,
                                       "loss": None}

        def train(w, step, loss):
            w.train(step, loss)
            state["running"][w.job].update(step=step, loss=loss)

        lease(w1)
        lease(w2)
        wait_frame(panes, state)
        # Long losses, then short ones: the shorter lines must not keep the
        # tail of the longer ones.
        train(w1, 120, 123456.789)
        train(w2, 80, 98765.4321)
        wait_frame(panes, state)
        train(w1, 500, 0.5)
        train(w2, 200, 1.25)
        wait_frame(panes, state)
        # Both jobs end: one fails; their two lines must go.
        w1.done()
        del state["running"][w1.job]
        state["succeeded"] += 1
        failed_job = w2.job
        w2.failed("boom: loss is NaN at step 201")
        del state["running"][w2.job]
        state["failed"] += 1
        wait_frame(panes, state)
        # One more runs alone, then the rest finish quickly.
        lease(w1)
        train(w1, 10, 2.5)
        wait_frame(panes, state)
        while True:
            w1.done()
            del state["running"][w1.job]
            state["succeeded"] += 1
            if state["queued"] == 0:
                break
            lease(w1)
        for _ in range(100):
            if all(panes.exit_status(w) is not None for w in WIDTHS):
                break
            time.sleep(0.1)
        for width in WIDTHS:
            if panes.exit_status(width) != 1:
                fail("%d columns: watch exited %s, expected 1 (a job failed)"
                     % (width, panes.exit_status(width)))
            text = "\n".join(panes.screen(width))
            if "failed jobs of sweep 1" not in text or "boom" not in text:
                print(text, file=sys.stderr)
                fail("%d columns: the failed job is not listed" % width)
            if ("job %d (" % failed_job) not in text:
                fail("%d columns: failed job %d not named" % (width, failed_job))
        if plain.wait(timeout=30) != 1:
            fail("plain watch exited %s, expected 1" % plain.returncode)
        plain_out.close()
        check_plain(open(os.path.join(d, "plain.txt")).read())
        print("watch in tmux at %s columns: ok" % " and ".join(map(str, WIDTHS)))
    finally:
        if panes:
            panes.close()
        if plain and plain.poll() is None:
            plain.kill()
        if daemon:
            daemon.stop()
        shutil.rmtree(d, ignore_errors=True)


def check_plain(text):
    """Not a terminal: no escape codes, one line per job end."""
    if "\033" in text or "\r" in text:
        fail("plain output holds terminal control characters")
    lines = [l for l in text.split("\n") if l]
    sweeps = [l for l in lines if l.startswith("sweep 1:")]
    for a, b in zip(sweeps, sweeps[1:]):
        if a.split(", ETA")[0] == b.split(", ETA")[0]:
            fail("plain output repeats an unchanged sweep line: %r" % a)
    if not any(l.startswith("0 workers connected") for l in lines):
        fail("plain output never said 0 workers connected")
    # a line per job end (issue 44), the summary; no per-step lines
    for l in lines:
        if not re.match(r"(sweep 1: |job \d+ (succeeded|failed|ended): lr=0\.000\d{4} seed=\d"
                        r".* \(\d/6 ended, ETA |\d+ job\(s\) \w+ \(\d/6 ended|"
                        r"0 workers connected|$|sweep 1 ended in |"
                        r"failed jobs of sweep 1:|  job \d+ \(|bifocal: )", l):
            fail("unexpected plain line %r" % l)
    if not any(re.match(r"sweep 1 ended in .*: succeeded 5, failed 1, cancelled 0, "
                        r"pruned 0 of 6$", l) for l in lines):
        fail("plain output has no summary line")


main()
