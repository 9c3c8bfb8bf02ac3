"""A scratch build for the layout checks' planted cases: C files compiled
to objects and listed in compile_commands.json as meson lists them, under
a root of their own."""
import json
import os
import subprocess
import sys
import tempfile


def run(script, tree):
    """The check's exit code and output on tree."""
    r = subprocess.run([sys.executable, script, tree], capture_output=True,
                       text=True)
    return r.returncode, r.stdout + r.stderr


def plant(files, prefix):
    """BUILD of a scratch root holding files {relative path: C text}."""
    d = tempfile.mkdtemp(prefix=prefix)
    b = os.path.join(d, "build")
    os.makedirs(b)
    entries = []
    for rel, text in files.items():
        src = os.path.join(d, rel)
        os.makedirs(os.path.dirname(src), exist_ok=True)
        with open(src, "w") as f:
            f.write(text)
        obj = rel.replace("/", "_") + ".o"
        subprocess.run(["cc", "-c", src, "-o", os.path.join(b, obj)],
                       check=True)
        entries.append({"directory": b, "file": "../" + rel, "output": obj})
    with open(os.path.join(b, "compile_commands.json"), "w") as f:
        json.dump(entries, f)
    return b
