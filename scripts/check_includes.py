#!/usr/bin/env python3
"""Checks the layout rule of docs/architecture.md by reading #include lines.

usage: check_includes.py [ROOT]      (default: the repository root)

1. Folders depend one way: common <- engine <- worker, common <- stream
   <- worker, server, results; common <- server; and the client's three
   folders: common, stream <- results (what a sweep's results say) <-
   dashboard (the HTTP server) <- cli (the `bifocal` command), which may
   also use results directly.  Nothing includes cli/, and results/ never
   includes a dashboard/ header.  A quoted include must resolve to a
   header in the including file's own folder tree or in a folder it may
   depend on.
2. Forbidden system headers: common/ includes no uv.h, sqlite3.h or mpi.h;
   engine/ includes no uv.h or mpi.h; stream/ (the libuv plumbing of the
   transports) no sqlite3.h or mpi.h.
3. No circles between modules (x.c, x.h and a private x_internal.h are
   module x): if x includes y's
   header, y must not reach x's header through any chain of includes.

Prints one line per violation, naming the file and line; exits 1 if any.
"""
import os
import re
import sys

# folder -> the folders its code may include from (itself first)
ALLOWED = {
    "common": ["common"],
    "stream": ["stream", "common"],
    "engine": ["engine", "common"],
    "worker": ["worker", "engine", "stream", "common"],
    "server": ["server", "stream", "common"],
    "results": ["results", "stream", "common"],
    "dashboard": ["dashboard", "results", "stream", "common"],
    "cli": ["cli", "dashboard", "results", "stream", "common"],
}
FORBIDDEN_SYSTEM = {
    "common": {"uv.h", "sqlite3.h", "mpi.h"},
    "engine": {"uv.h", "mpi.h"},
    "stream": {"sqlite3.h", "mpi.h"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def sources(root):
    """Yields (relative path, top folder) of every .c/.h under the folders."""
    for top in ALLOWED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    path = os.path.join(dirpath, n)
                    yield os.path.relpath(path, root), top


def includes(root, rel):
    """Yields (line number, kind, name): kind '"' or '<'."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield i, m.group(1), m.group(2)


def module_of(rel):
    """x.c, x.h and x_internal.h (x's private header) are module x."""
    stem = os.path.splitext(rel)[0]
    return stem[:-len("_internal")] if stem.endswith("_internal") else stem


def find_cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(root):
    files = list(sources(root))
    # header basename -> its paths (a name may exist in several folders)
    headers = {}
    for rel, top in files:
        if rel.endswith(".h"):
            headers.setdefault(os.path.basename(rel), []).append((rel, top))

    problems, graph = [], {}
    for rel, top in files:
        here = os.path.dirname(rel)
        for line, kind, name in includes(root, rel):
            where = f"{rel}:{line}"
            base = os.path.basename(name)
            if kind == "<":
                if base in FORBIDDEN_SYSTEM.get(top, ()):
                    problems.append(f"{where}: {top}/ must not include <{name}>")
                continue
            candidates = headers.get(base, [])
            # a header beside the file wins, as the compiler's search does
            target = next((c for c in candidates if os.path.dirname(c[0]) == here),
                          None)
            if target is None:
                target = next((c for c in candidates if c[1] in ALLOWED[top]), None)
            if target is None:
                if candidates:
                    owners = ", ".join(c[0] for c in candidates)
                    problems.append(f'{where}: {top}/ must not include "{name}" '
                                    f"({owners}); {top}/ may use "
                                    f"{', '.join(ALLOWED[top])}")
                continue  # a generated or system header
            if target[1] not in ALLOWED[top]:
                problems.append(f'{where}: {top}/ must not include "{name}" '
                                f"({target[0]})")
            a, b = module_of(rel), module_of(target[0])
            if a != b:
                graph.setdefault(a, set()).add(b)
    for comp in find_cycles(graph):
        problems.append("include circle between modules: " + " -> ".join(comp))
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_includes: {len(problems)} violation(s)")
        return 1
    print("check_includes: layout and include rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
