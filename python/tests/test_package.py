"""The Python package against the command-line tools on the demo model: the
same outputs (bit for bit: same libraries, same threads), the same greedy and
seeded text, the same perplexity; and every bad argument, file and array is an
exception, never a crash."""
import pathlib
import threading

import numpy as np
import pytest

import qcc
from conftest import DEMO, ROOT

PROMPT = "It is a truth universally acknowledged, that"


def test_installed_package():
    # The suite checks the wheel in the venv, not the source folder.
    here = pathlib.Path(qcc.__file__).resolve()
    assert ROOT / "python" not in here.parents, here
    assert (here.parent / "bin" / "qcc-calib").is_file()
    assert qcc.__version__ and qcc.FORMAT_VERSION > 0


def test_artifact(demo_float):
    a = qcc.Artifact(demo_float)
    assert {"main", "prefill", "decode"} <= set(a.functions)
    assert a.has_tokenizer and a.kv_cache == "paged" and a.gpu_kernels == 0
    (ids,) = a.input_ports("main")
    assert ids["name"] == "input_ids" and ids["dtype"] == "i64"
    assert len(ids["shape"]) == 2
    (logits,) = a.output_ports("main")
    assert logits["shape"][-1] == 3000


def test_run_equals_qrun(session, demo_float, qrun, tmp_path):
    ids = np.random.default_rng(0).integers(0, 3000, (2, 24), dtype=np.int64)
    np.save(tmp_path / "ids.npy", ids)
    qrun(demo_float, "--backend=cpu", "--threads", 2,
         "--input", f"input_ids={tmp_path / 'ids.npy'}", "--output-dir", tmp_path)
    expected = np.load(tmp_path / "logits.npy")
    out = session.run({"input_ids": ids})
    assert list(out) == ["logits"]
    logits = out["logits"]
    assert logits.dtype == np.float32 and logits.shape == (2, 24, 3000)
    assert logits.base is not None  # the runtime's buffer, not a copy
    np.testing.assert_array_equal(logits, expected)


def test_generate_greedy_equals_qrun(session, demo_float, qrun):
    expected = qrun(demo_float, "--backend=cpu", "--threads", 2, "--quiet",
                    "--prompt", PROMPT, "--max-new-tokens", 24)
    g = session.generate(PROMPT, 24)
    assert isinstance(g, qcc.Generation)
    assert PROMPT + g.text == expected.rstrip("\n")
    assert len(g.token_ids) == 24 and g.finish_reason == "length"
    assert g.prompt_tokens == len(session.tokenize(PROMPT))
    assert session.detokenize(g.token_ids).strip() == g.text.strip()


def test_generate_sampled_batch_equals_qrun(session, demo_float, qrun):
    prompts = [PROMPT, "Mr. Darcy", "She was"]
    sampling = dict(temperature=0.8, top_k=40, top_p=0.9, repeat_penalty=1.2,
                    seed=7)
    expected = qrun(demo_float, "--backend=cpu", "--threads", 2, "--quiet",
                    *[a for p in prompts for a in ("--prompt", p)],
                    "--max-new-tokens", 16, "--temperature", 0.8,
                    "--top-k", 40, "--top-p", 0.9, "--repeat-penalty", 1.2,
                    "--seed", 7)
    got = session.generate(prompts, 16, **sampling)
    assert [f"[{i}] {p}{g.text}" for i, (p, g) in enumerate(zip(prompts, got))] \
        == sorted(expected.splitlines(), key=lambda line: int(line[1:line.index("]")]))
    again = session.generate(prompts, 16, **sampling)
    assert [g.text for g in again] == [g.text for g in got]


def test_stop_strings_and_stream(session):
    full = session.generate(PROMPT, 24).text
    words = full.split()
    stop = " " + words[3]
    cut = session.generate(PROMPT, 24, stop=[stop, "@@never@@"])
    assert cut.text == full[:full.index(stop)] and cut.finish_reason == "stop"
    assert "".join(session.stream(PROMPT, 24)) == full
    assert "".join(session.stream(PROMPT, 24, stop=stop)) == cut.text
    # Leaving the loop ends the generation.
    pieces = []
    for piece in session.stream(PROMPT, 24):
        pieces.append(piece)
        if len(pieces) == 2:
            break
    assert full.startswith("".join(pieces))


def test_on_text(session):
    seen = []
    g = session.generate([PROMPT, "She was"], 8,
                         on_text=lambda i, piece: seen.append((i, piece)))
    for i in (0, 1):
        assert "".join(p for j, p in seen if j == i) == g[i].text
    # False ends that continuation; an exception ends all and comes back.
    short = session.generate(PROMPT, 20, on_text=lambda i, piece: False)
    assert len(short.token_ids) == 1 and short.finish_reason == "stop"

    def boom(i, piece):
        raise KeyError("from the callback")
    with pytest.raises(KeyError, match="from the callback"):
        session.generate(PROMPT, 8, on_text=boom)


def test_perplexity_equals_qrun(session, demo_float, qrun, tmp_path):
    text = (DEMO / "heldout.txt").read_text(encoding="utf-8")[:6000]
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    line = qrun(demo_float, "--backend=cpu", "--threads", 2, "--quiet",
                "--perplexity", tmp_path / "t.txt")
    r = session.perplexity(text)
    assert line.startswith(f"perplexity {r['perplexity']:.6g} over {r['predicted']} ")


def test_lora_adapters(workdir, qrun):
    """Runtime LoRA adapters by name (docs/LORA.md), as qrun --lora runs them;
    a merged adapter compiles too; an unknown name is a ValueError."""
    adapter = ROOT / "test" / "runtime" / "Inputs" / "austen-lora"
    out = workdir / "demo-lora.qpkg"
    qcc.compile(DEMO / "model.onnx", out, cuda=False,
                lora_adapters=[f"x={adapter}"])
    s = qcc.Session(out, backend="cpu", threads=2)
    for lora in (None, "x"):
        expected = qrun(out, "--backend=cpu", "--threads", 2, "--quiet", "--prompt",
                        PROMPT, "--max-new-tokens", 12, *(["--lora", lora] if lora else []))
        assert PROMPT + s.generate(PROMPT, 12, lora=lora).text == expected.rstrip("\n")
    assert s.generate(PROMPT, 12, lora="x").text != s.generate(PROMPT, 12).text
    with pytest.raises(ValueError, match="no LoRA adapter named 'y'"):
        s.generate(PROMPT, 4, lora="y")
    merged = workdir / "demo-merged.qpkg"
    qcc.compile(DEMO / "model.onnx", merged, cuda=False, lora=[f"{adapter}:0.5"])
    with pytest.raises(ValueError, match="the scale after ':' must be a number"):
        qcc.compile(DEMO / "model.onnx", merged, cuda=False, lora=[f"{adapter}:x"])


def test_compile_w8a8_with_calibration(workdir):
    # Calibration runs the package's own qcc-calib.
    calib = workdir / "calib.txt"
    calib.write_text((ROOT / "data" / "austen" / "emma.txt").read_text(
        encoding="utf-8")[:20000], encoding="utf-8")
    out = workdir / "w8a8.qpkg"
    qcc.compile(DEMO / "model.onnx", out, quant="w8a8", calib=calib,
                calib_samples=4, smoothquant_alpha="auto", cuda=False)
    s = qcc.Session(out, backend="cpu")
    assert len(s.generate(PROMPT, 4).token_ids) == 4


def test_compile_rotated_fp8(workdir, session):
    # --rotate keeps the float function (greedy text unchanged); FP8 W8A8
    # needs no calibration without SmoothQuant.
    rotated = workdir / "rotated.qpkg"
    qcc.compile(DEMO / "model.onnx", rotated, rotate=True, cuda=False)
    want = session.generate(PROMPT, 8).token_ids
    assert qcc.Session(rotated, backend="cpu").generate(PROMPT, 8).token_ids == want
    fp8 = workdir / "fp8.qpkg"
    qcc.compile(DEMO / "model.onnx", fp8, quant="fp8", smoothquant=False,
                cuda=False)
    assert len(qcc.Session(fp8, backend="cpu").generate(PROMPT, 4).token_ids) == 4


def test_compile_w4a16_lm_head(workdir):
    # Round to nearest needs no calibration; w4_lm_head puts the LM head in
    # int4 too, so the artifact is smaller.
    sizes = {}
    for head in (False, True):
        out = workdir / f"w4-{head}.qpkg"
        qcc.compile(DEMO / "model.onnx", out, quant="w4a16", w4_method="rtn",
                    w4_lm_head=head, cuda=False)
        sizes[head] = out.stat().st_size
        assert len(qcc.Session(out, backend="cpu").generate(PROMPT, 4).token_ids) == 4
    # The [3000, 256] head: 3 MB in f32, 0.4 MB in int4 with its scales.
    assert sizes[False] - sizes[True] > 2_000_000


def test_compile_w4a8(workdir):
    # W4A16's weights with int8 activations per token (round to nearest:
    # no calibration); SmoothQuant is on by default, as for w8a8.
    out = workdir / "w4a8.qpkg"
    qcc.compile(DEMO / "model.onnx", out, quant="w4a8", w4_method="rtn",
                smoothquant=False, cuda=False)
    assert len(qcc.Session(out, backend="cpu").generate(PROMPT, 6).token_ids) == 6
    with pytest.raises(qcc.Error, match="--quant=w4a8 needs --calib"):
        qcc.compile(DEMO / "model.onnx", workdir / "sq.qpkg", quant="w4a8",
                    w4_method="rtn", cuda=False)


def test_compile_errors(workdir):
    model = DEMO / "model.onnx"
    out = workdir / "x.qpkg"
    with pytest.raises(ValueError, match="quant must be none, w8a8, fp8, w4a16 or w4a8, not 'int3'"):
        qcc.compile(model, out, quant="int3")
    with pytest.raises(ValueError, match=r"--kv-block-tokens must be in \[1, 4096\], not 0"):
        qcc.compile(model, out, kv_block_tokens=0)
    with pytest.raises(ValueError, match="--smoothquant-alpha must be in"):
        qcc.compile(model, out, quant="w8a8", smoothquant_alpha=1.5)
    with pytest.raises(ValueError, match="--kv-scales=kivi needs --kv-dtype=i8"):
        qcc.compile(model, out, kv_scales="kivi")
    with pytest.raises(ValueError, match="--w4-lm-head need --quant=w4a16"):
        qcc.compile(model, out, w4_lm_head=True)
    with pytest.raises(TypeError):
        qcc.compile(model, out, no_such_option=True)
    with pytest.raises(qcc.Error, match="refusing to overwrite"):
        qcc.compile(model, model)
    with pytest.raises(qcc.Error, match="missing.onnx"):
        qcc.compile(workdir / "missing.onnx", out)
    garbage = workdir / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a model at all" * 10)
    with pytest.raises(qcc.Error, match="garbage.onnx"):
        qcc.compile(garbage, out)
    assert not out.exists()  # no half-written artifact


def test_artifact_errors(demo_float, workdir):
    with pytest.raises(qcc.Error, match="nope.qpkg"):
        qcc.Artifact(workdir / "nope.qpkg")
    cut = workdir / "cut.qpkg"
    cut.write_bytes(demo_float.read_bytes()[:4096])
    with pytest.raises(qcc.Error, match="cut.qpkg"):
        qcc.Artifact(cut)
    with pytest.raises(ValueError, match="backend must be auto, cpu or cuda"):
        qcc.Session(demo_float, backend="tpu")


def test_run_errors(session):
    ids = np.zeros((1, 8), dtype=np.int64)
    with pytest.raises(ValueError, match="element type not supported"):
        session.run({"input_ids": ids.astype(np.float64)})
    with pytest.raises(ValueError, match="not C-contiguous"):
        session.run({"input_ids": np.zeros((8, 2), dtype=np.int64).T})
    with pytest.raises(TypeError, match="expected a numpy array"):
        session.run({"input_ids": [[1, 2, 3]]})
    with pytest.raises(qcc.Error, match="input_ids"):
        session.run({"input_ids": np.zeros((8,), dtype=np.int64)})  # rank
    with pytest.raises(qcc.Error, match="input_ids"):
        session.run({"input_ids": ids.astype(np.int32)})  # dtype
    with pytest.raises(qcc.Error):
        session.run({})  # missing input
    with pytest.raises(qcc.Error, match="no entry point 'nope'"):
        session.run({"input_ids": ids}, function="nope")
    with pytest.raises(qcc.Error):
        session.run({"input_ids": np.full((1, 8), 99999, dtype=np.int64)})
    with pytest.raises(ValueError, match="top-p"):
        session.generate(PROMPT, 4, top_p=0)
    with pytest.raises(ValueError, match="temperature"):
        session.generate(PROMPT, 4, temperature=float("nan"))
    with pytest.raises(qcc.Error, match="detokenize"):
        session.detokenize([5, -1])
    with pytest.raises(qcc.Error, match="eos_token"):
        session.generate(PROMPT, 4, eos_token="<not a token>")
    with pytest.raises(qcc.Error, match="positions|context"):
        session.generate(PROMPT, 100000)


def test_threads_share_a_session(session):
    ids = np.random.default_rng(1).integers(0, 3000, (1, 16), dtype=np.int64)
    want_logits = session.run({"input_ids": ids})["logits"]
    want_text = session.generate(PROMPT, 12).text
    errors, results = [], []

    def work(k):
        try:
            for _ in range(2):
                if k % 2:
                    results.append(np.array_equal(
                        session.run({"input_ids": ids})["logits"], want_logits))
                else:
                    results.append(session.generate(PROMPT, 12).text == want_text)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [True] * 8


def test_perplexity_of_ids(session):
    text = (DEMO / "heldout.txt").read_text(encoding="utf-8")[:3000]
    ids = session.tokenize(text)
    assert session.perplexity(ids) == session.perplexity(text)


def test_compile_with_gpu_kernels(session, workdir):
    # The default compile (qcc without --no-cuda): kernels compiled by NVRTC
    # and the GPU plan; run on the CPU, that plan computes the same greedy text.
    out = workdir / "gpu.qpkg"
    qcc.compile(DEMO / "model.onnx", out)
    a = qcc.Artifact(out)
    assert a.gpu_kernels > 0
    plan = qcc.Session(a, backend="cpu", plan="kernels")
    assert plan.generate(PROMPT, 12).text == session.generate(PROMPT, 12).text


def test_example_script():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "examples/python/generate.py"),
                        "--no-cuda", "--max-new-tokens", "8"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for start in ("compiled model.onnx", "session: ", "greedy:   It is a truth",
                  "sampled:  ", "stop=,.:  ", "streamed: ", "batch:    ",
                  "perplexity ", "run: logits float32[1, "):
        assert any(line.startswith(start) for line in lines), (start, r.stdout)


def test_cpu_precision(demo_float):
    """qcc.set_cpu_precision("bf16"), as qrun --cpu-precision: a session made after
    it runs bf16 linears (the demo's perplexity within 0.1% of float32's, measured
    0.001%, and not equal to it); bad names are ValueError."""
    with pytest.raises(ValueError):
        qcc.set_cpu_precision("fp16")
    with open("/proc/cpuinfo") as f:
        has_bf16 = " avx512_bf16" in f.read()
    if not has_bf16:
        with pytest.raises(qcc.Error, match="AVX512_BF16"):
            qcc.set_cpu_precision("bf16")
        return
    text = (DEMO / "heldout.txt").read_text(encoding="utf-8")[:3000]
    f32 = qcc.Session(demo_float, backend="cpu", threads=2).perplexity(text)["perplexity"]
    qcc.set_cpu_precision("bf16")
    try:
        bf16 = qcc.Session(demo_float, backend="cpu", threads=2).perplexity(text)["perplexity"]
    finally:
        qcc.set_cpu_precision("f32")
    assert bf16 != f32 and abs(bf16 / f32 - 1) < 1e-3, (f32, bf16)
