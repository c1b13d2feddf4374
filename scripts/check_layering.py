#!/usr/bin/env python3
"""Includes point down the layers of docs/ARCHITECTURE.md ("Folders and how they depend").

    python3 scripts/check_layering.py [REPO]     # exit 1 and one line per finding
    python3 scripts/check_layering.py --self-test

Every `#include "<folder>/..."` of a tracked C++ file under a layered folder is
checked against the folders that folder may include (ctest `layering`):

- format/ stands on nothing of the project;
- the runtime's rooms: core on format; reference (the reference kernels) on
  core; cpu on reference; cuda on cpu; generate on cuda; text on core;
- dialects on format; codegen on dialects; passes on dialects and
  runtime/reference (constant folding runs the reference kernels), nothing
  of the runtime's backends; compiler on passes, codegen and runtime/core;
  report (`qcc --report`, library QccReport) on the compiler
  and the CPU executor.

A folder may include what the folders it may include may include
(transitively). Tests, tools, serve, python, fuzz and bench sit on top and are
not checked.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Folder -> the folders it may include directly (the closure is taken below).
ALLOWED = {
    "format": [],
    "runtime/core": ["format"],
    "runtime/reference": ["runtime/core"],
    "runtime/cpu": ["runtime/reference"],
    "runtime/cuda": ["runtime/cpu"],
    "runtime/generate": ["runtime/cuda"],
    "runtime/text": ["runtime/core"],
    "dialects": ["format"],
    "codegen": ["dialects"],
    "passes": ["dialects", "runtime/reference"],
    "compiler": ["passes", "codegen", "runtime/core"],
    "report": ["compiler", "runtime/cpu"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def closure(folder):
    seen, todo = set(), [folder]
    while todo:
        f = todo.pop()
        for g in ALLOWED.get(f, []):
            if g not in seen:
                seen.add(g)
                todo.append(g)
    return seen


def folder_of(path):
    """The layered folder a repository path belongs to, or None."""
    best = None
    for f in ALLOWED:
        if path == f or path.startswith(f + "/"):
            if best is None or len(f) > len(best):
                best = f
    return best


def check(repo):
    files = subprocess.run(["git", "-C", repo, "ls-files"], capture_output=True,
                           text=True, check=True).stdout.split()
    findings = []
    for path in files:
        if not path.endswith((".h", ".cpp", ".cuh", ".def", ".inc")):
            continue
        here = folder_of(path)
        if here is None:
            continue
        allowed = closure(here) | {here}
        with open(os.path.join(repo, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            target = folder_of(m.group(1))
            if target is None or target in allowed:
                continue
            line = text.count("\n", 0, m.start()) + 1
            findings.append(f"{path}:{line}: includes \"{m.group(1)}\": {here} may not "
                            f"include {target} (docs/ARCHITECTURE.md)")
    return findings


def self_test():
    with tempfile.TemporaryDirectory() as d:
        def write(p, text):
            os.makedirs(os.path.dirname(os.path.join(d, p)), exist_ok=True)
            with open(os.path.join(d, p), "w") as f:
                f.write(text)
        write("runtime/core/A.h", '#include "format/X.h"\n')
        write("runtime/core/B.cpp", '#include "runtime/cpu/K.h"\n')       # up: finding
        write("runtime/generate/G.cpp", '#include "runtime/core/A.h"\n')  # transitive: fine
        write("format/F.h", '#include "runtime/core/A.h"\n')              # up: finding
        write("passes/ConstEval.cpp", '#include "runtime/reference/R.h"\n')  # fine
        write("passes/Other.cpp", '#include "runtime/cpu/K.h"\n')          # finding
        write("tools/qrun/qrun.cpp", '#include "runtime/cuda/G.h"\n')      # unchecked
        subprocess.run(["git", "init", "-q", d], check=True)
        subprocess.run(["git", "-C", d, "add", "."], check=True)
        got = sorted(f.split(":")[0] for f in check(d))
        want = ["format/F.h", "passes/Other.cpp", "runtime/core/B.cpp"]
        if got != want:
            print(f"check_layering self-test: found {got}, expected {want}")
            return 1
    print("check_layering self-test: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo", nargs="?", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    findings = check(args.repo)
    for f in findings:
        print(f)
    print(f"layering: {len(findings)} include(s) pointing the wrong way")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
