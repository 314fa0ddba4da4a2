#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layering check: kvtier's folders include one another in one
direction only, and policy/ stays pure.

Reads every #include "..." of the library's folders, resolves it the way
the compiler does (next to the including file, then -Iinclude), and builds
the graph of folder -> folder edges. Fails (exit 1) when:
  - the folder graph has a cycle (it prints one);
  - a folder includes one above it in the declared order (LAYERS, top first);
  - policy/ includes anything but the C library and include/kvtier/.
Prints the edges with their counts either way.  Tests (tests/) are not part
of the library and may include anything.
Usage: tests/check_layers.py [root]     check a tree (default: this one)
       tests/check_layers.py --self-test  the check fails on trees that break
                                          each rule, and passes a clean one
"""
import os
import re
import sys

import check_common

# Top first: a folder may include itself and any folder after it. preload/
# holds the hooks and their wiring; place/ (placement and the live counters)
# and topo/ (which nodes are far) sit below the hooks that use them.
LAYERS = ["tools", "bench", "preload", "place", "tier", "profiler", "cuda_shim",
          "topo", "base", "policy", "include"]
# What policy/ may take from <...>: the C library (C11 and the POSIX headers
# glibc ships that do no I/O of their own are not needed there).
POLICY_SYSTEM = {"assert.h", "ctype.h", "errno.h", "float.h", "inttypes.h",
                 "limits.h", "math.h", "stdarg.h", "stdbool.h", "stddef.h",
                 "stdint.h", "stdio.h", "stdlib.h", "string.h", "strings.h"}

INC = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def folder_of(root, path):
    rel = os.path.relpath(path, root)
    top = rel.split(os.sep)[0]
    return top if top in LAYERS else None


def resolve(root, src, name):
    for base in (os.path.dirname(src), os.path.join(root, "include"),
                 os.path.join(root, "tests")):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def sources(root):
    for layer in LAYERS:
        top = os.path.join(root, layer)
        for d, _, files in os.walk(top):
            for f in sorted(files):
                if f.endswith((".c", ".h", ".S")):
                    yield os.path.join(d, f)


def find_cycle(edges):
    """One cycle in the folder graph as a list of folders, or None."""
    color, stack = {}, []

    def dfs(u):
        color[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, ())):
            if color.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if not color.get(v):
                c = dfs(v)
                if c:
                    return c
        stack.pop()
        color[u] = 2
        return None

    for u in sorted(edges):
        if not color.get(u):
            c = dfs(u)
            if c:
                return c
    return None


def check(root, quiet=False):
    edges, count, problems = {}, {}, []
    for src in sources(root):
        me = folder_of(root, src)
        rel = os.path.relpath(src, root)
        with open(src, encoding="utf-8", errors="replace") as fh:
            for ln, line in enumerate(fh, 1):
                m = INC.match(line)
                if not m:
                    continue
                kind, name = m.groups()
                if kind == "<":
                    if me == "policy" and name not in POLICY_SYSTEM:
                        problems.append(f"{rel}:{ln}: policy/ includes <{name}>"
                                        " (only the C library and include/kvtier/)")
                    continue
                tgt = resolve(root, src, name)
                if tgt is None:
                    problems.append(f"{rel}:{ln}: \"{name}\" resolves to no file")
                    continue
                to = folder_of(root, tgt)
                if to is None and me == "bench" and \
                        os.path.relpath(tgt, root).startswith("tests" + os.sep):
                    continue        # benchmarks drive the CUDA stand-ins (-Itests)
                if to is None:
                    problems.append(f"{rel}:{ln}: \"{name}\" is outside the library's folders")
                    continue
                if to == me:
                    continue
                edges.setdefault(me, set()).add(to)
                count[(me, to)] = count.get((me, to), 0) + 1
                if me == "policy" and to != "include":
                    problems.append(f"{rel}:{ln}: policy/ includes {name}"
                                    " (only the C library and include/kvtier/)")
                elif LAYERS.index(to) < LAYERS.index(me):
                    problems.append(f"{rel}:{ln}: {me}/ includes {name}, "
                                    f"which is above it ({to}/)")
    out = ["folder include edges (includes):"]
    for me in LAYERS:
        outs = sorted(edges.get(me, ()), key=LAYERS.index)
        if outs:
            out.append(f"  {me:9} -> " + ", ".join(f"{t} ({count[(me, t)]})" for t in outs))
    cyc = find_cycle(edges)
    if cyc:
        problems.append("cycle among folders: " + " -> ".join(cyc))
    else:
        out.append("cycle among folders: none")
    out += ["layering: " + p for p in problems]
    out.append(f"layering: {'FAILED' if problems else 'ok'} ({len(problems)} problems)")
    if not quiet:
        print("\n".join(out))
    return problems


def self_test():
    """Small trees, each breaking one rule (or none): the check must agree."""
    cases = [
        ("clean", {"preload/a.c": '#include "../base/kvt.h"\n',
                   "base/kvt.h": '#include "kvtier/x.h"\n', "include/kvtier/x.h": ""}, None),
        ("cycle", {"cuda_shim/d.c": '#include "../profiler/p.h"\n',
                   "profiler/p.h": '#include "../cuda_shim/s.h"\n', "cuda_shim/s.h": ""},
         "cycle among folders"),
        ("upward", {"base/b.c": '#include "../tier/t.h"\n', "tier/t.h": ""}, "above it"),
        ("placement reaches the hooks", {"place/p.c": '#include "../preload/r.h"\n',
                                         "preload/r.h": ""}, "above it"),
        ("policy includes a layer", {"policy/q.c": '#include "../base/kvt.h"\n',
                                     "base/kvt.h": ""}, "policy/ includes"),
        ("policy includes CUDA", {"policy/q.c": "#include <cuda.h>\n"}, "policy/ includes <cuda.h>"),
        ("unresolved", {"tier/m.c": '#include "nowhere.h"\n'}, "resolves to no file"),
    ]
    return check_common.self_test(check, cases, lambda probs, want: (not probs) if want is None else any(want in p for p in probs),
                                   lambda probs, want: f"{len(probs)} problems")


if __name__ == "__main__":
    sys.exit(check_common.main(check, self_test, __file__))
