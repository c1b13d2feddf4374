"""Runs a benchmark's measured commands and reports each one's peak RSS.

A child's ru_maxrss starts at the RSS of the process that forked it (Linux
folds the forking process's pages into the child's high-water mark at exec),
so the commands are forked by a small interpreter started before the caller
loads models or numpy: call start() first. Used by bench_cpu.py and
gpu_bench.py (which packs this file beside itself).
"""
import json
import os
import subprocess
import sys

LAUNCHER = r"""
import json, os, signal, subprocess, sys, tempfile, threading
for line in sys.stdin:
    job = json.loads(line)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(job["cmd"], stdout=out, stderr=err, env=job["env"], text=True)
        timer = None
        if job.get("timeout"):
            timer = threading.Timer(job["timeout"], p.kill)
            timer.start()
        _, status, usage = os.wait4(p.pid, 0)
        timed_out = bool(timer) and not timer.is_alive() and \
            os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        if timer:
            timer.cancel()
        out.seek(0)
        err.seek(0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "out": out.read(),
                          "err": err.read()[-20000:], "maxrss": usage.ru_maxrss * 1024,
                          "timed_out": timed_out}), flush=True)
"""
_launcher = None


def start():
    """Starts the launcher (once)."""
    global _launcher
    if _launcher is None:
        _launcher = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def run(cmd, env=None, timeout=None):
    """{"rc", "out", "err" (its last 20,000 characters), "maxrss" (bytes),
    "timed_out"} of CMD, killed after TIMEOUT seconds if given."""
    start()
    _launcher.stdin.write(json.dumps({"cmd": cmd, "env": env or dict(os.environ),
                                      "timeout": timeout}) + "\n")
    _launcher.stdin.flush()
    return json.loads(_launcher.stdout.readline())
