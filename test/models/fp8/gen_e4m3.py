#!/usr/bin/env python3
"""Reference FP8 E4M3 (OCP E4M3FN) conversions from ml_dtypes, for
test/unit/NumericsTest.cpp (format/device/numerics.h's floatToE4M3 and
e4m3ToFloat must match them bit for bit):

    e4m3_decode.npy   float32 [256]: the value of every code (NaN for 0x7f, 0xff)
    e4m3_inputs.npy   float32 [N]: values in [-448, 448] (qcc saturates first):
                      every code's value, the midpoints between neighbours
                      (ties to even) and one float either side of them, zeros,
                      the subnormal range, and random values at every scale
    e4m3_codes.npy    int32 [N]: ml_dtypes.float8_e4m3fn of each input, as its code

    .venv/bin/python test/models/fp8/gen_e4m3.py    # numpy + ml_dtypes (in .venv)
Deterministic (seed 0).
"""
import os

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    codes = np.arange(256, dtype=np.uint8)
    values = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    np.save(os.path.join(HERE, "e4m3_decode.npy"), values)

    finite = np.unique(values[np.isfinite(values)])  # sorted, -448 .. 448
    mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    mids = mids.astype(np.float32)
    assert np.all(mids.astype(np.float64) == (finite[:-1].astype(np.float64) + finite[1:]) / 2)
    inputs = [finite, mids,
              np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf)),
              np.array([0.0, -0.0, 2.0 ** -10, -(2.0 ** -10), 2.0 ** -11, 2.0 ** -12,
                        1e-30, -1e-30, 1e-45], np.float32)]
    rng = np.random.default_rng(0)
    for scale in 2.0 ** np.arange(-12, 9):
        inputs.append((rng.standard_normal(512) * scale).astype(np.float32))
    x = np.concatenate(inputs).astype(np.float32)
    x = np.clip(x, -448, 448)
    got = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(np.int32)
    np.save(os.path.join(HERE, "e4m3_inputs.npy"), x)
    np.save(os.path.join(HERE, "e4m3_codes.npy"), got)
    print(f"{len(x)} inputs; ml_dtypes {ml_dtypes.__version__}")


if __name__ == "__main__":
    main()
