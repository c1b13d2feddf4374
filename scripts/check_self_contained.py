#!/usr/bin/env python3
"""The repository stands alone: no tracked file names a path outside it.

    python3 scripts/check_self_contained.py [REPO]     # exit 1 and one line per finding
    python3 scripts/check_self_contained.py --self-test

A user has only a clone. Two kinds of reference would send them to a file they
do not have, and both fail this check (ctest `self-contained`):

- an absolute path of a development machine: a path under /work, /farm, /home,
  /root, /Users, /mnt, /media, /scratch, /srv or /workspace (system paths such as
  /usr/lib/llvm-22 or /tmp are the same on every Debian machine and pass);
- a relative path that climbs out of the repository: a `../` path resolved from
  the file's folder that ends above the repository's root, or one that names
  nothing there and would leave the root when run from it (README commands and
  scripts run from the root).

A `../` path behind a substitution the check cannot resolve (a shell variable,
`$(dirname "$0")`, lit's `%{...}`) is not judged, except lit's %S / %s / %p and
%models, which it knows. --self-test checks these rules on a scratch repository.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Spelled in two parts so that this file does not name them itself.
MACHINE_ROOTS = ["wo" + "rk", "fa" + "rm", "ho" + "me", "ro" + "ot", "Us" + "ers", "mn" + "t",
                 "me" + "dia", "scr" + "atch", "sr" + "v", "work" + "space"]
# A machine path starts a token: not after a letter, digit, '_', '.', '-', '~',
# '/', ':' or '%' (so URLs, "$HOME/work/..." and "%t/root/" do not count).
ABSOLUTE = re.compile(r"(?<![\w.~/:%$-])/(" + "|".join(MACHINE_ROOTS) + r")/")
# A path token: the run of path characters around a "../".
TOKEN = re.compile(r"[\w.%/@{}$+-]*\.\./[\w.%/@{}$*+-]*")
# lit substitutions that name folders of the repository.
LIT_DIRS = {"%S": None, "%s": None, "%p": None, "%models": "test/models"}


def tracked_files(repo):
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z"], capture_output=True,
                         check=True).stdout
    return [f for f in out.decode().split("\0") if f]


def escapes(repo, base, rel):
    """True when base/rel (base relative to repo) resolves above the repository."""
    path = os.path.normpath(os.path.join(base, rel))
    return path == ".." or path.startswith("../")


def judge_token(repo, fdir, token):
    """A reason when `token` (a path with ../) leaves the repository, else None."""
    token = token.rstrip(".,;:")
    if token.startswith("/"):
        return None  # the tail of a longer path (after a substitution); not judged
    base, rel = fdir, token
    head, _, rest = token.partition("/")
    if head in LIT_DIRS:
        base, rel = LIT_DIRS[head] or fdir, rest
    elif any(c in token for c in "%$@{}"):
        return None
    if escapes(repo, base, rel):
        return f"'{token}' leaves the repository (from {base or '.'}/)"
    inside = os.path.normpath(os.path.join(base, rel))
    if not os.path.exists(os.path.join(repo, inside.split("*")[0].rstrip("/") or ".")) \
            and base == fdir and escapes(repo, "", rel):
        return f"'{token}' names nothing in {fdir or '.'}/ and leaves the repository from its root"
    return None


def check(repo):
    findings = []
    for f in tracked_files(repo):
        path = os.path.join(repo, f)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if b"\0" in data:
            continue  # binary (weights, tokenizer models)
        text = data.decode("utf-8", errors="replace")
        fdir = os.path.dirname(f)
        for no, line in enumerate(text.splitlines(), 1):
            for m in ABSOLUTE.finditer(line):
                findings.append(f"{f}:{no}: names a path of a development machine "
                                f"('/{m.group(1)}/...'): {line.strip()[:120]}")
            if "../" in line:
                for t in TOKEN.findall(line):
                    why = judge_token(repo, fdir, t)
                    if why:
                        findings.append(f"{f}:{no}: {why}")
    return findings


def self_test():
    """The rules on a scratch repository: each bad file is found, no good one is."""
    bad = {
        "README.md": "see [design](../" + "shared/DESIGN.md)\n",
        "a/b/train.py": 'DATA = "/' + MACHINE_ROOTS[0] + '/shared/data"\n',
        "a/run.sh": 'glob.glob("../' + 'shared/data/*.txt")\n',
        "t/x.test": "; RUN: qcc %S/.." + "/../../outside/model.onnx\n",
        "notes.md": "kept in /" + MACHINE_ROOTS[2] + "/me/corpus\n",
    }
    good = {
        "a/b/c.py": 'ROOT = "..' + '/../x.txt"; cd "$(dirname "$0")/../.."\n',
        "x.txt": "data\n",
        "t/y.test": "; RUN: qcc %models/../../x.txt > /tmp/out\n",
        "doc.md": "https://example.org/" + MACHINE_ROOTS[0] + "/x and /usr/lib/llvm-22/bin/lit\n",
        "t/models/m.txt": "m\n",
    }
    with tempfile.TemporaryDirectory() as repo:
        for name, body in {**bad, **good}.items():
            os.makedirs(os.path.join(repo, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(repo, name), "w") as fh:
                fh.write(body)
        subprocess.run(["git", "init", "-q", repo], check=True)
        subprocess.run(["git", "-C", repo, "add", "-A"], check=True)
        found = {line.split(":")[0] for line in check(repo)}
    ok = found == set(bad)
    print(("PASS" if ok else "FAIL") + f": self-test found {sorted(found)}, "
          f"expected {sorted(bad)}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", nargs="?",
                    default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    findings = check(args.repo)
    for line in findings:
        print(line)
    n = len(tracked_files(args.repo))
    print(f"self-contained: {n} tracked files, {len(findings)} paths outside the repository"
          + (" (FAIL)" if findings else ""))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
