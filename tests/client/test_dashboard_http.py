#!/usr/bin/env python3
"""`bifocal dashboard` over real sockets, on a database the real store wrote
(results_fixture):

- the JSON API: every endpoint's rows checked against the database read
  here with Python's sqlite3 (curve buckets recomputed), against `bifocal
  compare --format json`, and the "since" cursors;
- hostile and broken HTTP: malformed requests, oversized request lines and
  headers, too many headers, a body too large, unknown paths and methods,
  a request that never completes, pipelining, too many connections, a Host
  that is not loopback; after all of it the dashboard still answers and
  the database file is unchanged (it is opened read-only);
- access from another host: network namespaces (scripts/cluster-hosts.sh)
  put the dashboard on h1 and a client on h2: no token, a wrong one, the
  token once (cookie and redirect), the cookie, a bearer header.  Making
  the namespaces needs root; where it cannot, the test fails.

usage: test_dashboard_http.py BIFOCAL RESULTS_FIXTURE CLUSTER_HOSTS_SH
       test_dashboard_http.py --request URL [HEADER...]   (the client run on h2)
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

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


# ---- a raw HTTP client ------------------------------------------------------

def exchange(addr, raw, timeout=15, read_all=True):
    """Sends raw bytes and reads until the peer closes (or the timeout):
    the bytes received."""
    host, port = addr
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(raw)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                break
        return out
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


def request(addr, path, method="GET", headers=(), close=True):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % addr]
    lines += list(headers)
    if close:
        lines.append("Connection: close")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode()
    responses = parse_responses(exchange(addr, raw))
    if not responses:
        return None, {}, b""
    return responses[0]


def get_json(addr, path, **kw):
    status, headers, body = request(addr, path, **kw)
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, None


# ---- the client side of the namespace test (run on h2) ----------------------

def client_main(argv):
    url = urllib.parse.urlsplit(argv[0])
    path = url.path + ("?" + url.query if url.query else "")
    status, headers, body = request((url.hostname, url.port), path,
                                    headers=argv[1:])
    print(json.dumps({"status": status, "headers": headers,
                      "body": body.decode("utf-8", "replace")}))


# ---- the dashboard ------------------------------------------------------------

class Dashboard:
    def __init__(self, bifocal, db, listen, d, prefix=()):
        self.port_file = os.path.join(d, "dash-%d.port" % time.monotonic_ns())
        self.log = open(self.port_file + ".log", "w")
        self.proc = subprocess.Popen(
            list(prefix) + [bifocal, "dashboard", "--db", db, "--listen",
                            listen, "--port-file", self.port_file],
            stdout=self.log, stderr=self.log)
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
    check(sorted(by_id) == [1, 2, 3], "every sweep listed")
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
    check(job["live"] is None and job["job"]["config"]["steps"] == 200,
          "job 5's config, not running")

    check_curves(addr, q)
    ro.close()


def check_curves(addr, q):
    status, c = get_json(addr, "/api/jobs/5/curves?width=16")
    check(status == 200 and c["bucket"] == 13, "curves bucket = ceil(200/16)")
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
    # A loopback peer naming another host: DNS rebinding.
    raw = b"GET /api/sweeps HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
    r = parse_responses(exchange(addr, raw))
    check(r and r[0][0] == 403, "a loopback request for another Host is refused")


def check_malformed(addr):
    cases = [
        ("garbage", b"GARBAGE\r\n\r\n", 400),
        ("bad version", b"GET / HTTP/9.9\r\n\r\n", 505),
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
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
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
    # More connections than the cap: the last is answered 503.
    socks = []
    try:
        for _ in range(256):
            socks.append(socket.create_connection(addr, timeout=10))
        data = exchange(addr, b"GET /api/sweeps HTTP/1.1\r\n\r\n")
        r = parse_responses(data)
        check(r and r[0][0] == 503, "connection 257 is answered 503")
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)
    status, _ = get_json(addr, "/api/sweeps")
    check(status == 200, "the dashboard still answers after all of it")


# ---- access from another host ---------------------------------------------------

def on_host(hosts_sh, cluster, host, *cmd):
    return subprocess.run([hosts_sh, "exec", cluster, host] + list(cmd),
                          capture_output=True, text=True, timeout=60)


def remote_get(hosts_sh, cluster, url, *headers):
    r = on_host(hosts_sh, cluster, "h2", sys.executable,
                os.path.abspath(__file__), "--request", url, *headers)
    if r.returncode != 0:
        raise RuntimeError("client on h2 failed: " + r.stderr)
    return json.loads(r.stdout)


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
        r = remote_get(hosts_sh, cluster, base + "/api/sweeps")
        check(r["status"] == 401 and "token" in json.loads(r["body"])["error"],
              "from h2 without a token: 401 saying how")
        r = remote_get(hosts_sh, cluster, base + "/")
        check(r["status"] == 401, "the page from h2 without a token: 401")
        r = remote_get(hosts_sh, cluster, base + "/sweeps/1?token=" + "f" * 64)
        check(r["status"] == 401, "a wrong token: 401")
        r = remote_get(hosts_sh, cluster, base + "/sweeps/1?x=1&token=" + token)
        cookie = r["headers"].get("set-cookie", "")
        check(r["status"] == 303 and r["headers"].get("location") == "/sweeps/1?x=1",
              "the token once: a redirect to the page without it (%s)" % r["headers"])
        check(cookie.startswith("bifocal_token=" + token + ";") and "HttpOnly" in cookie,
              "... and the cookie (%s)" % cookie)
        r = remote_get(hosts_sh, cluster, base + "//evil.example/?token=" + token)
        check(r["status"] == 303 and r["headers"].get("location") == "/",
              "no open redirect: //host goes to /")
        r = remote_get(hosts_sh, cluster, base + "/api/sweeps",
                       "Cookie: a=b; bifocal_token=" + token)
        check(r["status"] == 200 and json.loads(r["body"])["sweeps"],
              "with the cookie from h2: 200")
        r = remote_get(hosts_sh, cluster, base + "/api/sweeps",
                       "Cookie: bifocal_token=" + token[:-1] + "0")
        check(r["status"] == 401, "a wrong cookie: 401")
        r = remote_get(hosts_sh, cluster, base + "/api/sweeps",
                       "Authorization: Bearer " + token)
        check(r["status"] == 200, "a bearer token from h2: 200")
        r = on_host(hosts_sh, cluster, "h1", sys.executable,
                    os.path.abspath(__file__), "--request",
                    "http://127.0.0.1:%d/api/sweeps" % dash.port)
        check(r.returncode == 0 and json.loads(r.stdout)["status"] == 200,
              "on h1's loopback no token is needed")
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
        finally:
            dash.stop()
        check(sha256(db) == before, "the database file is unchanged")
        check_remote_access(bifocal, db, hosts_sh, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        sys.exit(1)
    print("dashboard HTTP: ok")


if len(sys.argv) > 1 and sys.argv[1] == "--request":
    client_main(sys.argv[2:])
else:
    main()
