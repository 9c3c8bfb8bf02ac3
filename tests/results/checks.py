"""checks: what the client tests written in Python share.

    check(cond, what)     a check that is counted, not raised: a failed one
                          prints "FAIL: what" and the test goes on, so that
                          one run reports every failure
    print_passes          set it True to print "ok   what" for each check
                          that holds as well
    finish(ok_line)       the end of a test: exits 1 after "N check(s)
                          failed" if any did, else prints ok_line
    bifocal_runner(path, timeout)
                          bifocal(*args, server=None, expect=0): runs the
                          CLI (through the daemon server = (address, token
                          file) when given), checks its exit status, returns
                          the CompletedProcess
    start_bifocald(path, db, folder, env=None)
                          a real bifocald on db, on a free loopback port

Imported as test_results_paged.py imports big_sweeps (the test's own folder
put first on sys.path)."""
import os
import subprocess
import sys
import time

failures = []
print_passes = False


def check(cond, what):
    if cond:
        if print_passes:
            print("ok   " + what)
        return
    failures.append(what)
    print("FAIL: " + what, file=sys.stderr)


def finish(ok_line="all checks passed"):
    if failures:
        print("%d check(s) failed" % len(failures), file=sys.stderr)
        sys.exit(1)
    print(ok_line)


def bifocal_runner(path, timeout):
    """The runner of the bifocal at path; timeout (seconds) bounds each run."""
    def bifocal(*args, server=None, expect=0):
        cmd = [path] + (["--server", server[0], "--token-file", server[1]]
                        if server else []) + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        check(p.returncode == expect, "%s: exit %d, expected %d; stderr: %s"
              % (" ".join(args), p.returncode, expect, p.stderr[-2000:]))
        return p
    return bifocal


def start_bifocald(path, db, folder, env=None):
    """Starts the bifocald at path on db, listening on 127.0.0.1 at the port
    it picks (written to folder/port), and waits for it to listen.  Returns
    the process (the caller stops it) and the server (address, token file)
    for bifocal_runner's runs."""
    port_file = os.path.join(folder, "port")
    daemon = subprocess.Popen([path, "--db", db, "--listen", "127.0.0.1:0",
                               "--port-file", port_file, "--log-level", "warn"],
                              env=env)
    try:
        for _ in range(400):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.05)
        return daemon, ("127.0.0.1:" + open(port_file).read().strip(), db + ".token")
    except BaseException:
        daemon.kill()
        daemon.wait()
        raise
