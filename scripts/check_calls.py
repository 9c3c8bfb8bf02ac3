#!/usr/bin/env python3
"""Checks that no source files call each other in a circle, from the objects
the compiler made (check_includes.py reads #include lines only: two files
that share one header can still call each other both ways).

usage: check_calls.py BUILD_DIR

Reads BUILD_DIR/compile_commands.json for each object of the programs'
folders (tests/ and bench/ are left out), lists with `nm` the global
symbols each defines and the ones it uses, and draws an arrow from file a
to file b when a uses a symbol that only b defines.  Every circle of files
(a strongly connected group of more than one) is printed with the names
that tie it; exits 1 if any.  A symbol defined in two files (one per
program, like main) draws no arrow.  Also fails on an object that uses a
library its folder may not (FORBIDDEN_CALLS: no SQL in server/sweep/).
"""
import json
import os
import subprocess
import sys

# One Tarjan for both layout checks: includes between modules, calls
# between files.
from check_includes import find_cycles

FOLDERS = ("common", "stream", "engine", "worker", "server", "results",
           "dashboard", "cli")
DEFINED = set("TDBRCVWGS")   # nm's letters of a global definition


def objects(build):
    """Yields (source path relative to the root, object path)."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    for e in entries:
        yield (os.path.normpath(os.path.join(e["directory"], e["file"])),
               os.path.normpath(os.path.join(e["directory"], e["output"])))


def program_files(build):
    """{object: its source relative to the root (BUILD_DIR/..)} for the
    objects of the program folders."""
    root = os.path.dirname(os.path.abspath(build))
    files = {}
    for src, obj in objects(build):
        rel = os.path.relpath(src, root)
        if rel.split(os.sep)[0] in FOLDERS and os.path.exists(obj):
            files[obj] = rel.replace(os.sep, "/")
    return files


def symbols(objs):
    """{object: ({defined name: nm's letter}, {used names})}, global
    symbols from one nm run."""
    out = subprocess.run(["nm", "-P", "-A", *objs], capture_output=True,
                         text=True, check=True).stdout
    syms = {o: ({}, set()) for o in objs}
    for line in out.splitlines():
        # "OBJECT: NAME TYPE [VALUE SIZE]"
        obj, _, rest = line.partition(": ")
        f = rest.split()
        if len(f) < 2 or obj not in syms:
            continue
        if f[1] == "U":
            syms[obj][1].add(f[0])
        elif f[1] in DEFINED and not f[0].startswith("__"):
            # "__" names are the implementation's (ASan's __odr_asan.*)
            syms[obj][0][f[0]] = f[1]
    return syms


def graph(build):
    """{file: {file it uses: names}}."""
    files = program_files(build)
    defs, uses = {}, {}
    for obj, (d, u) in symbols(sorted(files)).items():
        for name in d:
            defs.setdefault(name, set()).add(files[obj])
        uses.setdefault(files[obj], set()).update(u)
    edges = {}
    for a, names in uses.items():
        for name in names:
            owners = defs.get(name, ())
            if len(owners) != 1:
                continue
            (b,) = owners
            if b != a:
                edges.setdefault(a, {}).setdefault(b, set()).add(name)
    return edges


# Folders whose objects may not use a library's names, whatever they
# include: sweep files are parsed and expanded without SQL (the store keeps
# what they make), and common/ knows nothing of the loop or the database.
FORBIDDEN_CALLS = {
    "server/sweep": ("sqlite3_",),
    "common": ("sqlite3_", "uv_", "MPI_"),
    "engine": ("uv_", "MPI_"),
}


def forbidden_calls(build):
    """Lines naming each object that uses a name its folder may not."""
    files = program_files(build)
    out = []
    for obj, (_, used) in sorted(symbols(sorted(files)).items()):
        rel = files[obj]
        for where, prefixes in FORBIDDEN_CALLS.items():
            if not rel.startswith(where + "/"):
                continue
            bad = sorted(n for n in used if n.startswith(prefixes))
            if bad:
                out.append(f"{rel}: {where}/ may not call {', '.join(bad)}")
    return out


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: check_calls.py BUILD_DIR")
    bad = forbidden_calls(argv[1])
    for line in bad:
        print(line)
    edges = graph(argv[1])
    found = find_cycles(edges)
    for group in found:
        print("call circle between files: " + " -> ".join(group))
        for a in group:
            for b in group:
                names = edges.get(a, {}).get(b)
                if names:
                    shown = sorted(names)
                    more = f", and {len(shown) - 6} more" if len(shown) > 6 else ""
                    print(f"  {a} -> {b}: {', '.join(shown[:6])}{more}")
    if found or bad:
        return 1
    print(f"check_calls: {len(edges)} files, no circle of calls, no call "
          f"a folder may not make")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
