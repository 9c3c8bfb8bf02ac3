"""A real bifocald for Python tests, and the worker side of the wire protocol
(docs/protocol.md) spoken by hand, so a test decides exactly which step,
loss or outcome the daemon sees when (test_watch_tmux.py)."""
import json
import os
import socket
import subprocess
import time


class Daemon:
    """bifocald on a fresh database in directory d, on a free loopback port."""

    def __init__(self, bifocald, d):
        self.db = os.path.join(d, "t.db")
        port_file = os.path.join(d, "daemon.port")
        self.log = open(os.path.join(d, "daemon.log"), "w")
        self.proc = subprocess.Popen(
            [bifocald, "--db", self.db, "--listen", "127.0.0.1:0",
             "--port-file", port_file, "--log-level", "warn"], stdout=self.log, stderr=self.log)
        for _ in range(200):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("bifocald exited at start; see daemon.log")
            time.sleep(0.05)
        else:
            raise RuntimeError("bifocald did not start listening")
        self.addr = "127.0.0.1:" + open(port_file).read().strip()
        self.token_file = self.db + ".token"
        self.token = open(self.token_file).read().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.log.close()


class FakeWorker:
    """A worker that trains nothing: it says hello, leases a job and reports
    whatever steps, losses and outcome the test says."""

    def __init__(self, daemon, name):
        host, port = daemon.addr.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.buf = b""
        self.next_id = 0
        reply = self.request({"type": "hello", "version": 1,
                              "token": daemon.token, "role": "worker",
                              "name": name, "host": "localhost", "ranks": 1})
        if reply["type"] != "ack":
            raise RuntimeError("hello refused: %s" % reply)

    def request(self, msg):
        self.next_id += 1
        msg = dict(msg, id=self.next_id)
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._recv()
            if reply.get("id") == self.next_id:
                return reply

    def _recv(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("bifocald closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def lease(self):
        reply = self.request({"type": "request_job"})
        if reply["type"] != "job":
            raise RuntimeError("no job leased: %s" % reply)
        self.attempt = reply["attempt_id"]
        self.job = reply["job_id"]
        self.config = reply["config"]
        return reply

    def train(self, step, loss):
        reply = self.request({
            "type": "metrics", "attempt_id": self.attempt, "seq": step,
            "records": [{"type": "train", "step": step, "loss": loss,
                         "lr": 0.001, "grad_norm": 0.5,
                         "tokens_per_s": 12000.0}]})
        if reply["type"] != "ack":
            raise RuntimeError("metrics refused: %s" % reply)

    def done(self):
        return self.request({"type": "job_done", "attempt_id": self.attempt})

    def failed(self, error):
        return self.request({"type": "job_failed", "attempt_id": self.attempt,
                             "error": error})
