#!/usr/bin/env python3
"""Run the ONNX backend node tests (Debian's libonnx-testdata) through qcc + qrun.

    .venv/bin/python test/conformance/run_node_tests.py --qcc build/bin/qcc \
        --qrun build/bin/qrun [--data /usr/share/libonnx-testdata/data/node] \
        [--jobs 2] [--verbose] [--filter SUBSTRING]

A test is attempted when every node's op type is one `qcc --list-ops` claims
(default domain) and the model imports default-domain opset >= 13. For each
attempted test the model is compiled once and every test_data_set_* is run
with qrun on the CPU reference backend; each output is compared with the
expected output_*.pb using the ONNX backend test runner's tolerances
(rtol=1e-3, atol=1e-7; bool and integer outputs exactly).

bfloat16 outputs: qrun writes them as float32 (numpy has no bfloat16). The opset-13
cast tests store the expected bfloat16 as UINT16 bits of a *truncated* float32 (the
reference rounds to nearest even only since opset 19, as torch and onnxruntime do, and
as qrun does): those are compared widened to float32 within one bfloat16 ulp (rtol 2^-7).

Outcomes: PASS; REFUSED (qcc or qrun exits 1 saying the model uses something
unsupported); FAIL (wrong values, shape/dtype mismatch, crash, timeout, any
other error). The refusals are pinned in test/conformance/expected_refusals.txt
("test: reason", the reason with the test's folder written as TEST and the
scratch folder as WORK): a refusal that is not listed, or listed with another
reason, FAILs; a listed test that now passes is reported so that its line can
go (--write-refusals FILE writes the list this run found).
Exit status 1 if anything FAILed. Python is only the test driver here; the
model runs in qrun.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

RTOL = 1e-3
ATOL = 1e-7
TIMEOUT_S = 60
DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REFUSALS = os.path.join(HERE, "expected_refusals.txt")

# An exit-1 message that says the model uses something qcc does not support.
REFUSAL = re.compile(r"unsupported|is not supported|not supported", re.IGNORECASE)


REFUSALS_HEADER = """\
# ONNX node tests that qcc or qrun refuse, with the one-line reason
# (test/conformance/run_node_tests.py; TEST is the test's folder, WORK the
# scratch folder). A refusal not listed here, or with another reason, fails the
# suite; a listed test that passes is reported so that its line can go.
# Written by run_node_tests.py --write-refusals FILE and reviewed by hand.
"""


def claimed_ops(qcc):
    out = subprocess.run([qcc, "--list-ops"], capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    if out.returncode != 0:
        sys.exit(f"run_node_tests: '{qcc} --list-ops' failed: {out.stderr.strip()}")
    ops = set()
    for line in out.stdout.splitlines():
        m = re.match(r"\s*([A-Za-z][A-Za-z0-9_]*)\b", line)
        if m:
            ops.add(m.group(1))
    if not ops:
        sys.exit("run_node_tests: 'qcc --list-ops' listed no ops")
    return ops


def default_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return None


def all_nodes(graph):
    """Every node, including those in subgraphs (If/Loop/Scan bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from all_nodes(g)


def classify(test_dir, ops):
    """(attempt?, model or None, why-skipped)."""
    try:
        model = onnx.load(os.path.join(test_dir, "model.onnx"))
    except Exception as e:  # noqa: BLE001 - an unreadable test is skipped, not ours
        return False, None, f"onnx cannot load model.onnx: {e}"
    opset = default_opset(model)
    if opset is None or opset < 13:
        return False, model, f"opset {opset}"
    for node in all_nodes(model.graph):
        if node.domain not in ("", "ai.onnx") or node.op_type not in ops:
            return False, model, f"op {node.domain + '.' if node.domain else ''}{node.op_type}"
    return True, model, ""


def one_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    if not lines:
        return "(no message)"
    msg = lines[-1] if len(lines) == 1 else " | ".join(lines[:3])
    return msg if len(msg) <= 400 else msg[:400] + "..."


def run_tool(cmd):
    """(kind, message): kind in ok / refused / error / crash / timeout."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "timeout", f"timed out after {TIMEOUT_S} s: {' '.join(cmd[:2])}"
    if p.returncode == 0:
        return "ok", ""
    msg = one_line(p.stderr + p.stdout)
    if p.returncode < 0:
        return "crash", f"killed by signal {-p.returncode}: {msg}"
    if p.returncode != 1:
        return "crash", f"exit status {p.returncode}: {msg}"
    n_lines = len([l for l in p.stderr.splitlines() if l.strip()])
    if REFUSAL.search(msg):
        return "refused", msg
    extra = "" if n_lines <= 1 else f" ({n_lines} lines on stderr, expected 1)"
    return "error", msg + extra


def family(dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return "bool"
    if np.issubdtype(dt, np.floating):
        return "float"
    if np.issubdtype(dt, np.integer):
        return "int"
    return dt.kind


def compare(name, got, want, rtol=None):
    """'' when equal within tolerance (rtol: RTOL unless given), else a reason."""
    if got.shape != want.shape:
        return f"output '{name}': shape {list(got.shape)} != expected {list(want.shape)}"
    if family(got.dtype) != family(want.dtype):
        return f"output '{name}': dtype {got.dtype} != expected {want.dtype}"
    if family(want.dtype) in ("bool", "int"):
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            i = tuple(bad[0])
            return (f"output '{name}': {len(bad)} of {want.size} elements differ "
                    f"(first at {[int(x) for x in i]}: got {got[i].item()!r}, expected {want[i].item()!r})")
        return ""
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    close = np.isclose(g, w, rtol=RTOL if rtol is None else rtol, atol=ATOL, equal_nan=True)
    if close.all():
        return ""
    bad = np.argwhere(~close)
    i = tuple(bad[0])
    with np.errstate(invalid="ignore"):
        diff = np.abs(g - w)
        finite = np.isfinite(diff)
        maxabs = diff[finite].max() if finite.any() else float("nan")
    return (f"output '{name}': {len(bad)} of {want.size} elements off "
            f"(max abs err {maxabs:.3g}; first at {[int(x) for x in i]}: got {got[i].item()!r}, "
            f"expected {want[i].item()!r})")


def dtype_note(name, got, want):
    if got.dtype != want.dtype and family(got.dtype) == family(want.dtype):
        return f"output '{name}': dtype {got.dtype} (expected {want.dtype})"
    return ""


def load_refusals(path):
    """{test: reason} from a 'test: reason' file (# comments)."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip() and not line.startswith("#"):
                test, _, reason = line.partition(": ")
                out[test.strip()] = reason.strip()
    return out


def run_test(args, test_dir, model, tmp_root):
    """(outcome, reason, notes); a reason names the folders as TEST and WORK."""
    name = os.path.basename(test_dir)
    work = tempfile.mkdtemp(prefix=name + ".", dir=tmp_root)
    outcome, reason, notes = run_test_in(args, test_dir, model, work)
    return outcome, reason.replace(test_dir, "TEST").replace(work, "WORK"), notes


def run_test_in(args, test_dir, model, work):
    qpkg = os.path.join(work, "model.qpkg")
    kind, msg = run_tool([args.qcc, os.path.join(test_dir, "model.onnx"), "--no-cuda", "-o", qpkg])
    if kind == "refused":
        return "REFUSED", f"qcc: {msg}", []
    if kind != "ok":
        return "FAIL", f"qcc {kind}: {msg}", []

    inits = {i.name for i in model.graph.initializer}
    in_names = [i.name for i in model.graph.input if i.name not in inits]
    out_names = [o.name for o in model.graph.output]
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    if not sets:
        return "FAIL", "no test_data_set_* directories", []
    notes = []
    for ds in sets:
        ds_dir = os.path.join(test_dir, ds)
        cmd = [args.qrun, qpkg]
        n_in = len([f for f in os.listdir(ds_dir) if re.fullmatch(r"input_\d+\.pb", f)])
        for i in range(n_in):
            if i >= len(in_names):
                return "FAIL", f"{ds}: input_{i}.pb has no graph input to go to", notes
            if in_names[i] == "":  # an omitted optional input
                continue
            cmd += ["--input", f"{in_names[i]}={os.path.join(ds_dir, f'input_{i}.pb')}"]
        out_dir = os.path.join(work, ds)
        cmd += ["--output-dir", out_dir]
        kind, msg = run_tool(cmd)
        if kind == "refused":
            return "REFUSED", f"qrun ({ds}): {msg}", notes
        if kind != "ok":
            return "FAIL", f"qrun {kind} ({ds}): {msg}", notes
        compared = 0
        for i, oname in enumerate(out_names):
            want_pb = os.path.join(ds_dir, f"output_{i}.pb")
            if not os.path.exists(want_pb):
                continue
            compared += 1
            t = onnx.TensorProto()
            with open(want_pb, "rb") as f:
                t.ParseFromString(f.read())
            want = numpy_helper.to_array(t)
            out_type = model.graph.output[i].type.tensor_type.elem_type
            rtol = RTOL
            if out_type == onnx.TensorProto.BFLOAT16 and t.data_type == onnx.TensorProto.UINT16:
                want = (want.astype(np.uint32) << 16).view(np.float32)  # truncated, see top
                rtol = 2.0**-7
            got_path = os.path.join(out_dir, oname.replace("/", "_") + ".npy")
            if not os.path.exists(got_path):
                return "FAIL", f"{ds}: qrun wrote no {os.path.basename(got_path)}", notes
            try:
                got = np.load(got_path, allow_pickle=False)
            except Exception as e:  # noqa: BLE001
                return "FAIL", f"{ds}: cannot read {os.path.basename(got_path)}: {e}", notes
            why = compare(oname, got, want, rtol)
            if why:
                return "FAIL", f"{ds}: {why}", notes
            note = dtype_note(oname, got, want)
            if note and note not in notes:
                notes.append(note)
        if not compared:
            return "FAIL", f"{ds}: no output_*.pb to compare against", notes
    return "PASS", "", notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qcc", required=True)
    ap.add_argument("--qrun", required=True)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--verbose", action="store_true",
                    help="also print passes, skips and dtype notes")
    ap.add_argument("--filter", default="", help="only tests whose name contains this")
    ap.add_argument("--expected-refusals", default=DEFAULT_REFUSALS,
                    help="the pinned refusals ('test: reason' lines)")
    ap.add_argument("--write-refusals", metavar="FILE",
                    help="write the refusals of this run in that form")
    args = ap.parse_args()
    args.qcc = os.path.abspath(args.qcc)
    args.qrun = os.path.abspath(args.qrun)
    if not os.path.isdir(args.data):
        sys.exit(f"run_node_tests: {args.data}: no such directory")

    ops = claimed_ops(args.qcc)
    tests = sorted(d for d in os.listdir(args.data)
                   if os.path.isfile(os.path.join(args.data, d, "model.onnx"))
                   and args.filter in d)
    attempted, skipped = [], []
    for t in tests:
        ok, model, why = classify(os.path.join(args.data, t), ops)
        (attempted if ok else skipped).append((t, model, why))
    if args.verbose:
        for t, _, why in skipped:
            print(f"{t}: SKIPPED ({why})")

    results = {}
    with tempfile.TemporaryDirectory(prefix="qcc-node-tests.") as tmp_root:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futs = {pool.submit(run_test, args, os.path.join(args.data, t), m, tmp_root): t
                    for t, m, _ in attempted}
            for fut in concurrent.futures.as_completed(futs):
                t = futs[fut]
                try:
                    results[t] = fut.result()
                except Exception as e:  # noqa: BLE001 - a harness bug is a FAIL too
                    results[t] = ("FAIL", f"harness error: {type(e).__name__}: {e}", [])

    expected = load_refusals(args.expected_refusals)
    refused = {t: r[1] for t, r in results.items() if r[0] == "REFUSED"}
    if args.write_refusals:
        with open(args.write_refusals, "w", encoding="utf-8") as f:
            f.write(REFUSALS_HEADER + "".join(f"{t}: {r}\n" for t, r in sorted(refused.items())))
    for t, reason in refused.items():
        if expected.get(t) != reason:
            results[t] = ("FAIL", (f"refused with another reason than the pinned '{expected[t]}': "
                                   if t in expected else "a refusal that is not pinned: ")
                          + reason, results[t][2])
    now_pass = [t for t in sorted(results) if results[t][0] == "PASS" and t in expected]

    counts = {"PASS": 0, "FAIL": 0, "REFUSED": 0}
    for t in sorted(results):
        outcome, reason, notes = results[t]
        counts[outcome] += 1
        if outcome != "PASS":
            print(f"{t}: {outcome}: {reason}")
        elif args.verbose:
            print(f"{t}: PASS")
        if args.verbose:
            for n in notes:
                print(f"{t}: note: {n}")
    print(f"conformance: {counts['PASS']} passed, {counts['FAIL']} failed, "
          f"{counts['REFUSED']} refused of {len(attempted)} attempted "
          f"({len(skipped)} skipped: unclaimed ops or opset < 13)")
    for t in now_pass:
        print(f"{t}: listed in {os.path.basename(args.expected_refusals)} but passes now: "
              "remove its line")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
