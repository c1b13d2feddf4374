"""Schema sanity check of `qcc --report=json` (docs/ROOFLINE.md), stdlib only.

Usage: check_roofline_json.py REPORT.json
Asserts the keys and types of the "qcc-roofline/1" schema, that every kernel
has a time per target equal to its roofline max(FLOPs / peak, bytes /
bandwidth), and that the totals are the sums over the kernels; then prints
one line per entry point and per kernel ("FUNCTION REGION KIND flops=N
bytes=N kv=N") for FileCheck.
"""
import json
import math
import sys

COST = {"precision": str, "flops": float, "weight_bytes": float,
        "activation_bytes": float, "kv_bytes": float, "bytes": float,
        "intensity": float, "seconds": dict, "bound": dict}


def check(obj, keys, where):
    for key, kind in keys.items():
        assert key in obj, f"{where}: no '{key}'"
        value = obj[key]
        if kind is float:
            assert isinstance(value, (int, float)) and math.isfinite(value) \
                and value >= 0, f"{where}.{key}: {value!r}"
        else:
            assert isinstance(value, kind), f"{where}.{key}: {value!r}"


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


def main():
    report = json.load(open(sys.argv[1]))
    check(report, {"schema": str, "model": str, "batch": int, "context": int,
                   "kv_element_bytes": float, "targets": list,
                   "functions": list}, "report")
    assert report["schema"] == "qcc-roofline/1"
    peaks = {}
    for t in report["targets"]:
        check(t, {"name": str, "bandwidth": float, "f32": float, "f16": float,
                  "i8": float, "source": str}, "target")
        peaks[t["name"]] = t
    for f in report["functions"]:
        check(f, {"name": str, "batch": int, "tokens": int, "cached": int,
                  "glue_nodes": int, "kernels": list, "total": dict,
                  "tokens_per_second": dict,
                  "tokens_per_second_at_bandwidth": dict}, f["name"])
        sums = {k: 0.0 for k in ("flops", "bytes")}
        times = {name: 0.0 for name in peaks}
        for k in f["kernels"]:
            where = f"{f['name']}/{k.get('region')}"
            check(k, dict(COST, region=str, kind=str, ops=list), where)
            assert close(k["bytes"], k["weight_bytes"] + k["activation_bytes"]
                         + k["kv_bytes"]), where
            for name, p in peaks.items():
                floor = max(k["flops"] / p[k["precision"]],
                            k["bytes"] / p["bandwidth"])
                assert close(k["seconds"][name], floor), (where, name)
                assert k["bound"][name] in ("memory", "compute"), where
                times[name] += k["seconds"][name]
            for key in sums:
                sums[key] += k[key]
            print(f"{f['name']} {k['region']} {k['kind']} "
                  f"flops={k['flops']:.0f} bytes={k['bytes']:.0f} "
                  f"kv={k['kv_bytes']:.0f}")
        total = f["total"]
        check(total, COST, f["name"] + "/total")
        for key in sums:
            assert close(total[key], sums[key]), (f["name"], key)
        for name in peaks:
            assert close(total["seconds"][name], times[name]), f["name"]
        print(f"{f['name']} batch={f['batch']} tokens={f['tokens']} "
              f"cached={f['cached']} kernels={len(f['kernels'])}")
    print("schema ok")


if __name__ == "__main__":
    main()
