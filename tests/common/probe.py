"""A test probe from Python: a C program that puts a library behind a line
protocol (one request a line on stdin, one JSON object a line on stdout;
tests/common/probe_reader.h), and the failures a test collects.

    probe = Probe(sys.argv[1])
    r = probe.ask("cs", 0.05, 3, 0.1, 0.2, 0.3)
    probe.failures.append("...")
    sys.exit(probe.finish())"""
import json
import subprocess


class Probe:
    def __init__(self, path):
        self.path = path
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.failures = []

    def ask(self, *words):
        self.proc.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def finish(self):
        """Prints the failures; the exit status: 1 if any, else 0."""
        self.proc.stdin.close()
        if self.proc.wait() != 0:
            self.failures.append(f"{self.path} exited {self.proc.returncode}")
        for f in self.failures:
            print("FAIL", f)
        print(f"{len(self.failures)} failure(s)")
        return 1 if self.failures else 0
