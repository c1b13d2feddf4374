#!/usr/bin/env python3
"""Run qcc + qrun on the hand-built contrib-op graphs (test/models/contrib) and compare
with onnxruntime's outputs.

    .venv/bin/python test/e2e/check_contrib.py [CASE_DIR ...] [--qcc build/bin/qcc]
        [--qrun build/bin/qrun]

Each case (matmulnbits, rotary, skiplayernorm: see test/models/contrib/gen_contrib.py)
goes through check_zoo.py's check: compile, run on the stored inputs, every output within
max|qrun - ref| / max|ref| <= 1e-4 (float32 on both sides, different summation orders:
a few ulps); cases whose meta.json sets "w8a8" (those with linears) also compile as W8A8
and stay within check_zoo's sanity bound. Exit status 1 if any case fails. Needs only
numpy.
"""
import argparse
import json
import os
import sys

import check_zoo

CONTRIB = os.path.join(check_zoo.ROOT, "test", "models", "contrib")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="case folders (default: every contrib case)")
    ap.add_argument("--qcc", default=os.path.join(check_zoo.ROOT, "build", "bin", "qcc"))
    ap.add_argument("--qrun", default=os.path.join(check_zoo.ROOT, "build", "bin", "qrun"))
    args = ap.parse_args()
    cases = args.cases or sorted(
        os.path.join(CONTRIB, d) for d in os.listdir(CONTRIB)
        if os.path.isfile(os.path.join(CONTRIB, d, "model.onnx")))
    failed = 0
    for case in cases:
        with open(os.path.join(case, "meta.json")) as f:
            w8a8 = json.load(f).get("w8a8", False)
        row = check_zoo.check_case(case, args.qcc, args.qrun, w8a8=w8a8)
        err = "-" if row["err"] is None else f"{row['err']:.2e}"
        print(f"{row['case']}: {row['result']} (compiles {row['compiles']}; raised "
              f"{row['raised']}; leftover {row['leftover']}; max rel err {err}; "
              f"w8a8 {row['w8a8']}){' ' + row['note'] if row['note'] else ''}")
        failed += row["result"] != "PASS"
    print(f"contrib: {len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
