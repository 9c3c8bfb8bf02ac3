#!/usr/bin/env python3
"""`bifocal dashboard` over real sockets, on a database the real store wrote
(results_fixture):

- the JSON API: every endpoint's rows checked against the database read
  here with Python's sqlite3 (curve buckets recomputed), against `bifocal
  compare --format json`, and the "since" cursors;
- hostile and broken HTTP: malformed requests (a version 1.2, two Host
  headers, a path that is not UTF-8), oversized request lines and headers,
  too many headers, a body too large, unknown paths and methods, a request
  that never completes, pipelining, a Host that is not loopback; after all
  of it the dashboard still answers and the database file is unchanged (it
  is opened read-only);
- what a peer can cost: peers that pipeline and never read stay within the
  per-connection budget (the dashboard's peak RSS, from /proc); strangers'
  idle connections beyond the cap take no place from a newcomer; the cap
  holds for connections that were let in; a refused request's connection
  is closed;
- access from another host: network namespaces (scripts/cluster-hosts.sh)
  put the dashboard on h1 and a client on h2: no token, a wrong one, a
  token in the URL (refused), signing in at /login (a session cookie named
  per dashboard, never the token, Secure behind TLS, expiring), a bearer
  header; 300 strangers' connections from h2 while a token holder there is
  served every time.  Making the namespaces needs root; where it cannot,
  the test fails.

usage: test_dashboard_http.py BIFOCAL RESULTS_FIXTURE CLUSTER_HOSTS_SH
       test_dashboard_http.py --request [--method M] [--body B] [--keep-alive]
                              URL [HEADER...]     (the client run on h2)
       test_dashboard_http.py --hold URL N        (strangers' connections from
                                                   h2, until stdin closes)
"""
import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse

# checks.py lives beside the results tests (tests/results/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'results'))
from checks import check, finish  # noqa: E402


# ---- a raw HTTP client ------------------------------------------------------

def read_to_eof(sock):
    """The bytes received on sock until the peer closes (or sock's timeout
    passes)."""
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            break
        if not chunk:
            break
        out += chunk
    return out


def exchange(addr, raw, timeout=15):
    """Sends raw bytes and reads until the peer closes (or the timeout):
    the bytes received."""
    s = socket.create_connection(addr, timeout=timeout)
    try:
        s.sendall(raw)
        return read_to_eof(s)
    finally:
        s.close()


def parse_responses(data):
    """[(status, headers, body), ...] of the responses in data."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            headers.setdefault(k.strip().lower(), v.strip())
        n = int(headers.get("content-length", "0"))
        body, data = rest[:n], rest[n:]
        out.append((status, headers, body))
    return out


def request_bytes(addr, path, method="GET", headers=(), close=True, body=b""):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % addr]
    lines += list(headers)
    if body:
        lines.append("Content-Length: %d" % len(body))
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def request(addr, path, method="GET", headers=(), close=True):
    raw = request_bytes(addr, path, method, headers, close)
    responses = parse_responses(exchange(addr, raw))
    if not responses:
        return None, {}, b""
    return responses[0]


def closed_after_answer(addr, raw, timeout=10):
    """Sends one keep-alive request: (its response, whether the dashboard
    then closed the connection rather than keep it open for timeout s)."""
    s = socket.create_connection(addr, timeout=timeout)
    try:
        s.sendall(raw)
        out, closed = b"", False
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            out += chunk
        r = parse_responses(out)
        return (r[0] if r else (None, {}, b"")), closed
    finally:
        s.close()


def get_json(addr, path, **kw):
    status, headers, body = request(addr, path, **kw)
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, None


# ---- the client side of the namespace test (run on h2) ----------------------

def client_main(argv):
    method, body, keep_alive = "GET", b"", False
    while argv[0].startswith("--"):
        if argv[0] == "--keep-alive":
            keep_alive, argv = True, argv[1:]
        elif argv[0] == "--method":
            method, argv = argv[1], argv[2:]
        elif argv[0] == "--body":
            body, argv = argv[1].encode(), argv[2:]
        else:
            raise SystemExit("unknown option " + argv[0])
    url = urllib.parse.urlsplit(argv[0])
    path = url.path + ("?" + url.query if url.query else "")
    addr = (url.hostname, url.port)
    raw = request_bytes(addr, path, method, argv[1:], close=not keep_alive,
                        body=body)
    (status, headers, body), closed = closed_after_answer(addr, raw)
    print(json.dumps({"status": status, "headers": headers, "closed": closed,
                      "body": body.decode("utf-8", "replace")}))


def hold_main(argv):
    """N connections to URL's host, half idle, half after a request without
    the token (left open by the client), held until stdin closes."""
    url = urllib.parse.urlsplit(argv[0])
    addr, n = (url.hostname, url.port), int(argv[1])
    socks = []
    for i in range(n):
        s = socket.create_connection(addr, timeout=10)
        if i % 2:
            s.sendall(request_bytes(addr, url.path, close=False))
        socks.append(s)
    print("ready", len(socks), flush=True)
    sys.stdin.read()


# ---- the dashboard ------------------------------------------------------------

class Dashboard:
    def __init__(self, bifocal, db, listen, d, prefix=(), args=(), env=None):
        self.port_file = os.path.join(d, "dash-%d.port" % time.monotonic_ns())
        self.log = open(self.port_file + ".log", "w")
        self.proc = subprocess.Popen(
            list(prefix) + [bifocal, "dashboard", "--db", db, "--listen",
                            listen, "--port-file", self.port_file] + list(args),
            stdout=self.log, stderr=self.log, env=env)
        for _ in range(200):
            if os.path.exists(self.port_file):
                self.port = int(open(self.port_file).read())
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("the dashboard did not start: "
                           + open(self.log.name).read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


# ---- the API -------------------------------------------------------------------

def check_api(bifocal, db, addr):
    ro = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    q = lambda sql, *a: ro.execute(sql, a).fetchall()

    status, d = get_json(addr, "/api/sweeps")
    check(status == 200, "/api/sweeps answers 200")
    by_id = {s["sweep_id"]: s for s in d["sweeps"]}
    check(sorted(by_id) == list(range(1, 10)), "every sweep listed")
    check(by_id[1]["total"] == 9 and by_id[1]["succeeded"] == 8
          and by_id[1]["failed"] == 1, "sweep 1 counts")
    check(d["workers"]["connected"] == 0 and "bifocal-worker" in d["workers"]["hint"],
          "workers summary with a hint")

    status, s = get_json(addr, "/api/sweeps/1")
    check(status == 200 and s["sweep"]["name"] == "fixture", "sweep summary")
    check(s["varying"] == ["rope", "seed"] and s["fields"] == ["rope"],
          "varying fields and groups")
    compare = json.loads(subprocess.run(
        [bifocal, "compare", "1", "--db", db, "--format", "json"],
        check=True, capture_output=True, text=True).stdout)
    check(len(compare) == len(s["compare"]), "the comparison has compare's rows")
    for a, b in zip(compare, s["compare"]):
        check(a["group"] == b["group"] and a["eval_depth"] == b["eval_depth"]
              and abs(a["loss_mean"] - b["loss_mean"]) < 1e-6 * abs(a["loss_mean"]),
              "comparison row %s/%s as bifocal compare" % (a["group"], a["eval_depth"]))

    status, j = get_json(addr, "/api/sweeps/1/jobs")
    last = q("SELECT max(finished_ms) FROM jobs WHERE sweep_id = 1")[0][0]
    check(status == 200 and len(j["jobs"]) == 9 and j["cursor"] == last,
          "job table with its cursor")
    statuses = dict(q("SELECT job_id, status FROM jobs WHERE sweep_id = 1"))
    check(all(r["status"] == statuses[r["job_id"]] for r in j["jobs"]),
          "job statuses as stored")

    status, live = get_json(addr, "/api/sweeps/1/live")
    check(status == 200 and live["ended"] == [] and live["running"] == [],
          "live without since: nothing ended is resent")
    _, live = get_json(addr, "/api/sweeps/1/live?since=%d" % last)
    want = [r[0] for r in q("SELECT job_id FROM jobs WHERE sweep_id = 1 "
                            "AND finished_ms >= ? ORDER BY job_id", last)]
    check([r["job_id"] for r in live["ended"]] == want,
          "live since the cursor: the jobs that ended since")
    _, live = get_json(addr, "/api/sweeps/1/live?since=0")
    check(len(live["ended"]) == 9, "live since 0: every ended job")

    status, job = get_json(addr, "/api/jobs/5")
    check(status == 200 and job["fields"] == {"rope": "spectral", "seed": 2},
          "job 5's swept fields")
    check(len(job["attempts"]) == 1 and job["attempts"][0]["worker"],
          "job 5's attempt with its worker")
    # a search's trial is named by its stage and searched value, as compare
    # names its group (issue 44), once its sweep is read
    for _ in range(100):
        _, s9 = get_json(addr, "/api/sweeps/9")
        if not s9.get("pending"):
            break
        time.sleep(0.1)
    lr = ro.execute("SELECT config ->> '$.lr', seed FROM jobs WHERE job_id = 58").fetchone()
    _, trial = get_json(addr, "/api/jobs/58")
    check(trial["fields"] == {"stage": "tune", "rope": "rope", "seed": lr[1],
                              "lr": float("%.7g" % lr[0])},
          "job 58, a tune trial: its stage and searched lr: %r" % trial["fields"])
    check(job["live"] is None and job["job"]["config"]["steps"] == 200,
          "job 5's config, not running")

    check_curves(addr, q)
    ro.close()


def check_running_stage(db, addr):
    """A running job of a sweep with stages shows its stage among its
    fields: a column of jobs, not of its config (the running table's stage
    column was empty).  One job of sweep 6 runs for the check, then is put
    back."""
    for _ in range(200):
        _, s = get_json(addr, "/api/sweeps/6")
        if not s.get("pending"):
            break
        time.sleep(0.05)
    check("stage" in s["varying"], "sweep 6 varies by stage")
    rw = sqlite3.connect(db)
    job = rw.execute("SELECT min(job_id) FROM jobs WHERE sweep_id = 6 "
                     "AND stage = 'confirm'").fetchone()[0]
    rw.execute("UPDATE jobs SET status = 'running' WHERE job_id = ?", (job,))
    rw.commit()
    try:
        _, live = get_json(addr, "/api/sweeps/6/live")
        fields = [r["fields"] for r in live["running"] if r["job_id"] == job]
        check(fields and fields[0].get("stage") == "confirm",
              "running job %d's stage: %s" % (job, fields))
    finally:
        rw.execute("UPDATE jobs SET status = 'succeeded' WHERE job_id = ?",
                   (job,))
        rw.commit()
        rw.close()


def check_curves(addr, q):
    status, c = get_json(addr, "/api/jobs/5/curves?width=16")
    check(status == 200 and c["bucket"] == 13, "curves bucket = ceil(200/16)")
    keys = [m["key"] for m in c["metric_keys"]]
    stored = [r[0] for r in q("SELECT DISTINCT key FROM metrics WHERE job_id = 5 "
                              "ORDER BY key")]
    check(keys == ["loss", "lr", "grad_norm", "tokens_per_s"]
          and all(isinstance(m["title"], str) and m["title"] for m in c["metric_keys"]),
          "the page learns the training metrics (key, title) from the reply")
    check(sorted(c["metrics"]) == sorted(k for k in stored if k in keys),
          "every stored metric of the table is bucketed, no other")
    loss = c["metrics"]["loss"]
    rows = q("SELECT max(step), avg(value) FROM metrics WHERE job_id = 5 "
             "AND key = 'loss' GROUP BY step / 13 ORDER BY step / 13")
    check(loss["step"] == [r[0] for r in rows], "loss buckets' last steps")
    check(all(abs(a - r[1]) <= 1e-6 * abs(r[1]) for a, r in zip(loss["mean"], rows)),
          "loss buckets' means")
    check(len(loss["step"]) <= 17, "at most width + 1 points")
    heads = c["frequencies"]
    check(len(heads) == 4 and all(len(h["ratio"]) == 4 for h in heads),
          "4 learnable heads of 4 pairs (spectral)")
    check(all(abs(h["ratio"][p][0] - 1) < 1e-9 for h in heads for p in range(4)),
          "frequency ratios start at 1")
    evals = {e["depth"]: e for e in c["evals"]}
    check(sorted(evals) == [4, 8] and evals[8]["step"] == [100, 200],
          "evals per depth over steps")
    _, later = get_json(addr, "/api/jobs/5/curves?width=16&since=100")
    check(later["since"] == 91 and min(later["metrics"]["loss"]["step"]) >= 91,
          "since is aligned to its bucket and only later buckets come")
    check(later["next_since"] == 195, "next_since is the newest bucket's start")
    check(later["metrics"]["loss"]["step"] == [s for s in loss["step"] if s >= 91],
          "a since reply is the tail of the whole")


def check_errors(addr):
    for path, status in [("/api/nope", 404), ("/api/sweeps/abc", 404),
                         ("/api/sweeps/99", 404), ("/api/jobs/0", 404),
                         ("/api/sweeps/1/nope", 404), ("/api/jobs/99999", 404),
                         ("/api/jobs/99999/curves", 404),
                         ("/api/jobs/2/curves?width=5", 400),
                         ("/api/jobs/2/curves?width=abc", 400),
                         ("/api/jobs/2/curves?since=-1", 400),
                         ("/api/jobs/2/curves?since=%zz", 400),
                         ("/api/sweeps/1/live?since=" + "9" * 40, 400),
                         ("/nope", 404), ("/sweeps/x", 404), ("/jobs/", 404)]:
        got, body = get_json(addr, path)
        check(got == status and isinstance(body, dict) and body.get("error"),
              "%s answers %d with a JSON error (got %s %s)" % (path, status, got, body))
    st, h, body = request(addr, "/api/sweeps", method="POST")
    check(st == 405 and h.get("allow") == "GET, HEAD", "POST is refused (405, Allow)")
    st, h, body = request(addr, "/", method="HEAD")
    check(st == 200 and body == b"" and int(h["content-length"]) > 1000,
          "HEAD of the page: its length, no body")
    st, h, body = request(addr, "/")
    check(st == 200 and b"BifocalDashboard.start" in body
          and "script-src" in h.get("content-security-policy", ""),
          "the page, with a content security policy")
    # A path that is not UTF-8 names no page (it was echoed into a JSON
    # error, which jansson refused: 500).
    for path in [b"/api/\xc3\x28", b"/api/sweeps/\xff", b"/\xfe\xff"]:
        raw = b"GET " + path + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        r = parse_responses(exchange(addr, raw))
        check(r and r[0][0] == 404 and json.loads(r[0][2]).get("error"),
              "%r: 404 with a JSON error (got %r)" % (path, r[:1]))
    # A loopback peer naming another host: DNS rebinding.  Refused, and the
    # connection closed after the answer.
    raw = b"GET /api/sweeps HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    (st, h, _), closed = closed_after_answer(addr, raw)
    check(st == 403 and closed, "a loopback request for another Host is "
          "refused and its connection closed (%s, closed: %s)" % (st, closed))


def check_malformed(addr):
    cases = [
        ("garbage", b"GARBAGE\r\n\r\n", 400),
        ("bad version", b"GET / HTTP/9.9\r\n\r\n", 505),
        ("version 1.2", b"GET / HTTP/1.2\r\nHost: localhost\r\n\r\n", 505),
        ("two Host headers", b"GET / HTTP/1.1\r\nHost: localhost\r\n"
         b"Host: evil.example\r\n\r\n", 400),
        ("bad header", b"GET / HTTP/1.1\r\nHo st: x\r\n\r\n", 400),
        ("NUL in the target", b"GET /\x00 HTTP/1.1\r\n\r\n", 400),
        ("control character in a header", b"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400),
        ("request line too long", b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", 414),
        ("header too large", b"GET / HTTP/1.1\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n", 431),
        ("too many headers", b"GET / HTTP/1.1\r\n"
         + b"".join(b"X-%d: 1\r\n" % i for i in range(100)) + b"\r\n", 431),
        ("body too large", b"POST /api/sweeps HTTP/1.1\r\nContent-Length: 100000\r\n\r\n", 413),
        ("chunked body too large", b"POST /api/sweeps HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
         + (b"8000\r\n" + b"x" * 0x8000 + b"\r\n") * 3, 413),
        ("bad content length", b"GET / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400),
    ]
    for what, raw, status in cases:
        data = exchange(addr, raw)
        r = parse_responses(data)
        ok = r and r[0][0] == status and r[0][1].get("connection") == "close"
        body = json.loads(r[0][2]) if ok else None
        check(ok and body.get("error"), "%s: %d with a JSON error and the "
              "connection closed (got %r)" % (what, status, data[:120]))
    # Two requests in one write: two answers, in order.
    raw = (b"GET /api/sweeps/1 HTTP/1.1\r\nHost: localhost\r\n\r\n"
           b"GET /api/nope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    r = parse_responses(exchange(addr, raw))
    check([x[0] for x in r] == [200, 404], "pipelined requests answered in order")
    # A client that half-closes after its request still gets the answer.
    s = socket.create_connection(addr, timeout=15)
    s.sendall(b"GET /api/sweeps/1/jobs HTTP/1.1\r\nHost: localhost\r\n\r\n")
    s.shutdown(socket.SHUT_WR)
    data = read_to_eof(s)
    s.close()
    r = parse_responses(data)
    check(r and r[0][0] == 200 and len(json.loads(r[0][2])["jobs"]) == 9,
          "a half-closed client reads its whole answer")
    # A request that never completes is cut off (408) after its time.
    t0 = time.monotonic()
    data = exchange(addr, b"GET / HTTP/1.1\r\nHost: localhost\r\n", timeout=20)
    took = time.monotonic() - t0
    r = parse_responses(data)
    check(r and r[0][0] == 408 and took >= 9,
          "an incomplete request gets 408 after its 10 s (%.1f s)" % took)
    status, _ = get_json(addr, "/api/sweeps")
    check(status == 200, "the dashboard still answers after all of it")


# ---- what a peer can cost ---------------------------------------------------------

def rss_kib(pid, field):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError("no %s in /proc/%d/status" % (field, pid))


PIPELINE_BOUND_MIB = 128   # the budget is 8 MiB a connection; 4 peers


def check_pipelining(bifocal, db, d):
    """Peers that pipeline and never read cost at most their budget each:
    4 connections send 64 KiB of pipelined GET / (1,800 requests of a 97 KB
    page each, 180 MB of answers a connection if all were answered) and read
    nothing; the dashboard's peak RSS grows by less than PIPELINE_BOUND_MIB
    (before, it answered every request of a read at once: 700 MB here, the
    gigabytes of issue 15 with bigger answers).  Then a peer that pipelines
    and reads late gets every answer, in order."""
    # Under ASan, freed memory waits in a quarantine (256 MiB) before reuse,
    # which the RSS would count: kept small here, the RSS is what is live.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [
        env.get("ASAN_OPTIONS"), "quarantine_size_mb=4"]))
    dash = Dashboard(bifocal, db, "127.0.0.1:0", d, env=env)
    try:
        addr = ("127.0.0.1", dash.port)
        for _ in range(3):
            request(addr, "/")
        before = rss_kib(dash.proc.pid, "VmRSS")
        one = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        burst = one * (65536 // len(one))
        peers = []
        for _ in range(4):
            s = socket.create_connection(addr, timeout=10)
            s.setblocking(False)
            sent = 0
            while sent < len(burst):
                try:
                    sent += s.send(burst[sent:])
                except BlockingIOError:
                    break       # the kernel's buffers are full: it stopped
            peers.append(s)
        # The dashboard has read what it will once it answers another peer
        # (one loop thread); a few rounds let it read what came late.
        for _ in range(5):
            st, _, _ = request(addr, "/api/sweeps")
            check(st == 200, "another peer is served while 4 do not read")
            time.sleep(0.2)
        grown = (rss_kib(dash.proc.pid, "VmHWM") - before) / 1024
        check(grown < PIPELINE_BOUND_MIB, "4 peers pipelining without reading "
              "grew the dashboard by %.0f MiB (bound %d MiB)"
              % (grown, PIPELINE_BOUND_MIB))
        print("pipelining: peak RSS grew %.1f MiB" % grown)
        for s in peers:
            s.close()
        # Held requests are answered once the peer reads: 400 pipelined,
        # read after a pause, all 200 with the whole page, in order.
        s = socket.create_connection(addr, timeout=30)
        s.sendall(one * 399 + b"GET /api/nope HTTP/1.1\r\nHost: localhost\r\n"
                  b"Connection: close\r\n\r\n")
        time.sleep(0.5)
        data = read_to_eof(s)
        s.close()
        r = parse_responses(data)
        page_len = len(request(addr, "/")[2])
        check(len(r) == 400 and all(x[0] == 200 and len(x[2]) == page_len
                                    for x in r[:399]) and r[399][0] == 404,
              "400 pipelined requests read late: 399 pages and the 404, in "
              "order (got %d answers)" % len(r))
        # The last of them asks to close: its answers, 7.8 MB (within the
        # budget, beyond what the kernel buffers), wait for a peer that
        # reads 3 s later; the 2 s linger starts once they are written.
        s = socket.create_connection(addr, timeout=30)
        s.sendall(one * 79 + b"GET / HTTP/1.1\r\nHost: localhost\r\n"
                  b"Connection: close\r\n\r\n")
        time.sleep(3)
        data = read_to_eof(s)
        s.close()
        r = parse_responses(data)
        check(len(r) == 80 and all(len(x[2]) == page_len for x in r),
              "a peer that reads its last answers 3 s late gets them all "
              "(got %d of 80)" % len(r))
    finally:
        dash.stop()


def is_closed(s):
    """Whether the dashboard closed s (it has sent nothing on it)."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def check_places(addr):
    """Strangers cannot keep a newcomer out; the cap holds for connections
    that were let in."""
    idle = []
    try:
        # 300 idle connections, more than the 256 places: each newcomer
        # takes the place of the oldest idle one of its address (the cap of
        # 16 strangers an address), so a request is served, every time.
        for _ in range(300):
            idle.append(socket.create_connection(addr, timeout=10))
        got = [request(addr, "/api/sweeps")[0] for _ in range(20)]
        check(got == [200] * 20, "with 300 idle connections open, 20 requests "
              "on new ones are served (got %s)" % got)
        closed = sum(is_closed(s) for s in idle)
        check(closed >= 300 - 16, "the idle connections beyond an address's "
              "16 strangers were closed (%d of 300)" % closed)
    finally:
        for s in idle:
            s.close()
    time.sleep(0.5)
    let_in = []
    try:
        # 256 connections each let in (a request answered, kept alive):
        # the cap is reached, and the next is answered 503.
        for _ in range(256):
            s = socket.create_connection(addr, timeout=10)
            s.sendall(b"GET /api/workers HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let_in.append(s)
        for s in let_in:
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(65536)
        st, _, _ = request(addr, "/api/sweeps")
        check(st == 503, "with 256 connections let in, a new one gets 503 "
              "(got %s)" % st)
    finally:
        for s in let_in:
            s.close()
    time.sleep(0.5)


# ---- access from another host ---------------------------------------------------

def on_host(hosts_sh, cluster, host, *cmd):
    return subprocess.run([hosts_sh, "exec", cluster, host] + list(cmd),
                          capture_output=True, text=True, timeout=60)


def remote(hosts_sh, cluster, url, *headers, method=None, body=None,
           keep_alive=False):
    opts = (["--method", method] if method else []) \
        + (["--body", body] if body is not None else []) \
        + (["--keep-alive"] if keep_alive else [])
    r = on_host(hosts_sh, cluster, "h2", sys.executable,
                os.path.abspath(__file__), "--request", *opts, url, *headers)
    if r.returncode != 0:
        raise RuntimeError("client on h2 failed: " + r.stderr)
    return json.loads(r.stdout)


def sign_in(hosts_sh, cluster, base, token, next_page="/", *headers):
    body = urllib.parse.urlencode({"token": token, "next": next_page})
    return remote(hosts_sh, cluster, base + "/login",
                  "Content-Type: application/x-www-form-urlencoded", *headers,
                  method="POST", body=body)


def session_cookie(r):
    """(name, value, attributes) of a response's Set-Cookie, or None."""
    cookie = r["headers"].get("set-cookie")
    if not cookie:
        return None
    first, *attrs = [p.strip() for p in cookie.split(";")]
    name, _, value = first.partition("=")
    return name, value, attrs


def check_sign_in(hosts_sh, cluster, base, port, token):
    # No token: the API says how, a page is the sign-in form; both close.
    r = remote(hosts_sh, cluster, base + "/api/sweeps", keep_alive=True)
    check(r["status"] == 401 and "/login" in json.loads(r["body"])["error"],
          "from h2 without a token: 401 saying how")
    check(r["closed"], "the connection is closed after a 401")
    r = remote(hosts_sh, cluster, base + "/sweeps/1?x=1", keep_alive=True)
    check(r["status"] == 401 and 'action="/login"' in r["body"]
          and 'value="/sweeps/1?x=1"' in r["body"]
          and r["headers"]["content-type"].startswith("text/html"),
          "a page from h2 without a token: 401, the sign-in form coming back")
    check(r["closed"], "the connection is closed after the form")
    # A token in the URL would stay in the browser's history: refused.
    r = remote(hosts_sh, cluster, base + "/sweeps/1?token=" + token)
    check(r["status"] == 401 and "set-cookie" not in r["headers"]
          and "history" in r["body"],
          "a token in the URL is refused (%s %s)" % (r["status"], r["headers"]))
    r = remote(hosts_sh, cluster, base + "/api/sweeps?token=" + token)
    check(r["status"] == 401, "a token in an API URL is refused")
    # Signing in: a session of this dashboard, never the token.
    r = sign_in(hosts_sh, cluster, base, "f" * 64, "/sweeps/1")
    check(r["status"] == 401 and session_cookie(r) is None
          and 'action="/login"' in r["body"], "a wrong token: 401, the form")
    r = sign_in(hosts_sh, cluster, base, token, "/sweeps/1?x=1")
    c = session_cookie(r)
    check(r["status"] == 303 and r["headers"].get("location") == "/sweeps/1?x=1",
          "signing in: a redirect to the page asked for (%s)" % r["headers"])
    name = "bifocal_session_%d" % port
    check(c and c[0] == name and re.fullmatch("[0-9a-f]{64}", c[1])
          and c[1] != token and token not in r["headers"]["set-cookie"],
          "the cookie is this dashboard's own session secret, named after "
          "its port, never the daemon's token (%s)" % (c,))
    attrs = [a.lower() for a in (c[2] if c else [])]
    check("httponly" in attrs and "samesite=lax" in attrs and "path=/" in attrs
          and "max-age=43200" in attrs and "secure" not in attrs,
          "the cookie: HttpOnly, SameSite=Lax, 12 h, not Secure over plain "
          "HTTP (%s)" % attrs)
    secret = c[1] if c else ""
    r = sign_in(hosts_sh, cluster, base, token, "/", "X-Forwarded-Proto: https")
    c2 = session_cookie(r)
    check(c2 and "secure" in [a.lower() for a in c2[2]],
          "behind a TLS proxy the cookie is Secure (%s)" % (c2,))
    check(c2 and c2[1] != secret, "each sign-in is a new secret")
    r = sign_in(hosts_sh, cluster, base, token, "//evil.example/")
    check(r["status"] == 303 and r["headers"].get("location") == "/",
          "no open redirect: //host goes to /")
    r = remote(hosts_sh, cluster, base + "/api/sweeps",
               "Cookie: a=b; %s=%s" % (name, secret))
    check(r["status"] == 200 and json.loads(r["body"])["sweeps"],
          "with the session cookie from h2: 200")
    # A secret with its last digit changed (to one it is not: a secret
    # ending in 0 made "...0" the valid secret, 1 run in 16).
    tampered = secret[:-1] + ("1" if secret.endswith("0") else "0")
    for cookie in ["%s=%s" % (name, token), "bifocal_token=" + token,
                   "%s=%s" % (name, tampered)]:
        r = remote(hosts_sh, cluster, base + "/api/sweeps", "Cookie: " + cookie)
        check(r["status"] == 401, "cookie %s...: 401" % cookie[:40])
    r = remote(hosts_sh, cluster, base + "/api/sweeps",
               "Authorization: Bearer " + token)
    check(r["status"] == 200, "a bearer token from h2: 200")
    return secret


def check_second_dashboard(bifocal, db, hosts_sh, cluster, d, token, secret):
    """Another dashboard beside the first: its own cookie name and secrets;
    a session with a short lifetime ends."""
    dash = Dashboard(bifocal, db, "0.0.0.0:0", d, args=["--session-ttl", "2"],
                     prefix=[hosts_sh, "exec", cluster, "h1"])
    try:
        base = "http://10.213.0.1:%d" % dash.port
        name = "bifocal_session_%d" % dash.port
        r = remote(hosts_sh, cluster, base + "/api/sweeps",
                   "Cookie: %s=%s" % (name, secret))
        check(r["status"] == 401, "the first dashboard's session is not the "
              "second's")
        r = sign_in(hosts_sh, cluster, base, token)
        c = session_cookie(r)
        check(c and c[0] == name and "max-age=2" in [a.lower() for a in c[2]],
              "the second dashboard's cookie has its own name and lifetime "
              "(%s)" % (c,))
        time.sleep(3)
        r = remote(hosts_sh, cluster, base + "/api/sweeps",
                   "Cookie: %s=%s" % (name, c[1] if c else ""))
        check(r["status"] == 401, "a session past its lifetime is refused")
    finally:
        dash.stop()


def check_strangers(hosts_sh, cluster, base, token):
    """300 strangers' connections from h2 (half idle, half after a 401 they
    would keep open): a token holder on h2 is served every time."""
    hold = subprocess.Popen(
        [hosts_sh, "exec", cluster, "h2", sys.executable,
         os.path.abspath(__file__), "--hold", base + "/api/sweeps", "300"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ready = hold.stdout.readline()
        check(ready.startswith("ready 300"), "300 strangers' connections "
              "from h2 (%r)" % ready)
        got = [remote(hosts_sh, cluster, base + "/api/sweeps",
                      "Authorization: Bearer " + token)["status"]
               for _ in range(10)]
        check(got == [200] * 10, "a token holder on h2 beside 300 strangers' "
              "connections is served every time (got %s)" % got)
    finally:
        hold.stdin.close()
        hold.wait(timeout=30)


def check_remote_access(bifocal, db, hosts_sh, d):
    cluster = "bfd%d" % (os.getpid() % 100000)
    up = subprocess.run([hosts_sh, "up", cluster, "2"], capture_output=True,
                        text=True)
    if up.returncode != 0:
        check(False, "cannot make network namespaces for the access test "
              "(root and iproute2 needed): " + up.stderr.strip())
        return
    dash = None
    try:
        # Beyond loopback without a token file: refused at start.
        bare = os.path.join(d, "bare.db")
        shutil.copy(db, bare)
        r = on_host(hosts_sh, cluster, "h1", bifocal, "dashboard", "--db", bare,
                    "--listen", "10.213.0.1:0")
        check(r.returncode == 1 and "token" in r.stderr,
              "listening beyond loopback without the token is refused: "
              + r.stderr.strip())
        token = "0123456789abcdef" * 4
        fd = os.open(db + ".token", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (token + "\n").encode())
        os.close(fd)
        dash = Dashboard(bifocal, db, "0.0.0.0:0", d,
                         prefix=[hosts_sh, "exec", cluster, "h1"])
        base = "http://10.213.0.1:%d" % dash.port
        secret = check_sign_in(hosts_sh, cluster, base, dash.port, token)
        check_strangers(hosts_sh, cluster, base, token)
        r = on_host(hosts_sh, cluster, "h1", sys.executable,
                    os.path.abspath(__file__), "--request",
                    "http://127.0.0.1:%d/api/sweeps" % dash.port)
        check(r.returncode == 0 and json.loads(r.stdout)["status"] == 200,
              "on h1's loopback no token is needed")
        check_second_dashboard(bifocal, db, hosts_sh, cluster, d, token, secret)
    finally:
        if dash:
            dash.stop()
        subprocess.run([hosts_sh, "down", cluster], capture_output=True)


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    bifocal, fixture, hosts_sh = sys.argv[1:4]
    d = tempfile.mkdtemp(prefix="bf-dash-http-")
    try:
        db = os.path.join(d, "fixture.db")
        subprocess.run([fixture, db], check=True)
        before = sha256(db)
        dash = Dashboard(bifocal, db, "127.0.0.1:0", d)
        try:
            addr = ("127.0.0.1", dash.port)
            check_api(bifocal, db, addr)
            check_errors(addr)
            check_malformed(addr)
            check_places(addr)
            check(sha256(db) == before, "the database file is unchanged")
            check_running_stage(db, addr)
            before = sha256(db)
        finally:
            dash.stop()
        check_pipelining(bifocal, db, d)
        check(sha256(db) == before, "the database file is unchanged")
        check_remote_access(bifocal, db, hosts_sh, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    finish("dashboard HTTP: ok")


if len(sys.argv) > 1 and sys.argv[1] == "--request":
    client_main(sys.argv[2:])
elif len(sys.argv) > 1 and sys.argv[1] == "--hold":
    hold_main(sys.argv[2:])
else:
    main()
