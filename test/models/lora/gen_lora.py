#!/usr/bin/env python3
"""Generate the LoRA adapter fixtures: tiny base models, PEFT adapters, references.

    .venv-fixtures/bin/python test/models/lora/gen_lora.py [--only llama,gpt2]

(scripts/setup_fixtures.sh creates .venv-fixtures.) For each base family
(llama: torch.nn.Linear projections; gpt2: HF Conv1D, fan_in_fan_out) writes

    test/models/lora/<family>/model.onnx                  the BASE model, no adapter (legacy export)
    test/models/lora/<family>/inputs/<name>.npy           one per graph input
    test/models/lora/<family>/adapters/<a|b>/adapter_config.json
    test/models/lora/<family>/adapters/<a|b>/adapter_model.safetensors   as PEFT writes them
    test/models/lora/<family>/outputs/logits_base.npy     onnxruntime on model.onnx
    test/models/lora/<family>/outputs/logits_<a|b>.npy    onnxruntime on the merged model
    test/models/lora/<family>/meta.json

The base models are the model zoo's (test/models/zoo/gen_zoo.py: build_model,
export_legacy, plain_inputs), so model.onnx is byte-identical to
test/models/zoo/<family>-legacy/model.onnx. Each adapter is created with PEFT's
get_peft_model (fixed seed), trained a few AdamW steps on random token ids, its
lora_B scaled by a power of two where needed so that it moves the logits by at
least MIN_LOGIT_DIFF, and saved with save_pretrained. The adapter reference is
onnxruntime on PEFT's merge_and_unload() of the adapter reloaded from disk,
exported the same way as the base (the merged ONNX is not kept), checked against
the unmerged PEFT model's torch logits. Deterministic: the same package versions
give byte-identical files.
"""
import argparse
import contextlib
import hashlib
import importlib.metadata as md
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import warnings

# PEFT keeps target_modules as a set and save_pretrained writes it as list(set): its
# order in adapter_config.json follows str hashing, so fix the hash seed (re-exec).
if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "PYTHONHASHSEED": "0"})
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # PEFT never needs the hub here

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
import gen_zoo as zoo  # noqa: E402  (the zoo's tiny models, inputs and legacy export)

import peft  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402

FAMILIES = ["llama", "gpt2"]
TRAIN_STEPS, TRAIN_LR, TRAIN_B, TRAIN_S = 20, 1e-2, 4, 16
MIN_LOGIT_DIFF = 1.0   # adapter vs base, max abs over the defined logits
REL_TOL = 1e-4         # merged (onnxruntime) vs unmerged (torch), relative to max |logit|

# Block linears per family (module-name suffixes, as PEFT's target_modules match them).
TARGETS_ALL = {
    "llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "gpt2": ["c_attn", "c_proj", "c_fc"],  # c_proj: attn.c_proj and mlp.c_proj
}
TARGETS_QV = {"llama": ["q_proj", "v_proj"], "gpt2": ["c_attn"]}
# Adapter b's per-module overrides. PEFT matches a key K against the module name N
# (relative to the transformers model) with re.match(rf"(.*\.)?({K})$", N): the full
# name, or a suffix of it that starts after a "." (K is a regex). One full-name key
# and one suffix key per family.
PATTERNS = {
    "llama": dict(alpha_pattern={"model.layers.1.self_attn.q_proj": 16},
                  rank_pattern={"layers.1.self_attn.v_proj": 4}),
    "gpt2": dict(alpha_pattern={"transformer.h.1.attn.c_attn": 16},
                 rank_pattern={"h.0.attn.c_attn": 4}),
}


def adapter_configs(family):
    fan = family == "gpt2"  # Conv1D stores its weight [in, out]
    common = dict(task_type="CAUSAL_LM", lora_dropout=0.0, bias="none", fan_in_fan_out=fan)
    return {
        "a": LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS_ALL[family], **common),
        "b": LoraConfig(r=2, lora_alpha=4, use_rslora=True, target_modules=TARGETS_QV[family],
                        **PATTERNS[family], **common),
    }


def versions():
    return {n: md.version(n) for n in
            ["torch", "transformers", "peft", "onnx", "onnxruntime", "safetensors", "numpy"]}


def run_ort(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(["logits"], feeds)[0]


def keep_mask(feeds):
    """(batch, seq) positions whose logits are defined: a left-padding query attends to
    no key, so its row is whatever an implementation makes of it (zoo's ignored_positions)."""
    return feeds["attention_mask"] != 0


def max_abs(a, b, keep):
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))[keep]))


def torch_logits(model, feeds):
    with torch.no_grad():
        kw = {k: torch.from_numpy(v) for k, v in feeds.items()}
        return model(**kw, use_cache=False).logits.numpy()


def quiet():
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    return stack


def export(model, family, names, path):
    torch.manual_seed(0)
    with quiet():
        zoo.export_legacy(model, family, names, path)


def lora_layers(model):
    from peft.tuners.lora import LoraLayer
    return {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer)}


def check_patterns(family, cfg, layers, key):
    """Every targeted module's r and scaling as PEFT's update_layer sets them, and the
    pattern entries took effect."""
    prefix = "base_model.model."
    got = {}
    for n, m in layers.items():
        name = n[len(prefix):]
        r, alpha = m.r[key], m.lora_alpha[key]
        want_scale = alpha / math.sqrt(r) if cfg.use_rslora else alpha / r
        assert abs(m.scaling[key] - want_scale) < 1e-12, (n, m.scaling[key], want_scale)
        got[name] = {"r": r, "lora_alpha": alpha, "scaling": m.scaling[key]}
    for pat_attr, field in (("rank_pattern", "r"), ("alpha_pattern", "lora_alpha")):
        for pk, pv in getattr(cfg, pat_attr).items():
            hit = [n for n in got if re.match(rf"(.*\.)?({pk})$", n)]
            assert len(hit) == 1, (family, pat_attr, pk, hit)
            assert got[hit[0]][field] == pv, (family, pat_attr, got[hit[0]])
            default = cfg.r if field == "r" else cfg.lora_alpha
            others = [v for n, v in got.items() if n != hit[0] and v[field] != default]
            assert not others, others
            # the pattern changed this module's scaling away from the default one
            ref = cfg.lora_alpha / (math.sqrt(cfg.r) if cfg.use_rslora else cfg.r)
            assert abs(got[hit[0]]["scaling"] - ref) > 1e-6, (pat_attr, got[hit[0]])
    return got


def train(peft_model, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, zoo.V, (TRAIN_B, TRAIN_S), generator=g)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=TRAIN_LR)
    peft_model.eval()  # no dropout anywhere (gpt2's resid/attn/embd dropout): deterministic
    losses = []
    for _ in range(TRAIN_STEPS):
        loss = peft_model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return losses


def make_adapter(family, key, cfg, feeds, adir, seed):
    """Create, train and save one adapter; returns its meta entry."""
    base = zoo.build_model(family)
    torch.manual_seed(seed)  # lora_A's kaiming init draws from the global generator
    with quiet():
        pm = get_peft_model(base, cfg)
    layers = lora_layers(pm)
    with torch.no_grad():
        assert all(float(m.lora_B["default"].weight.abs().max()) == 0 for m in layers.values())
    losses = train(pm, seed + 1)
    keep = keep_mask(feeds)
    with pm.disable_adapter():
        base_logits = torch_logits(pm, feeds)
    b_scale = 1
    while True:
        diff = max_abs(torch_logits(pm, feeds), base_logits, keep)
        if diff >= MIN_LOGIT_DIFF:
            break
        assert b_scale < 2 ** 10, f"{family}/{key}: adapter moves the logits by {diff} only"
        b_scale *= 2
        with torch.no_grad():
            for m in layers.values():
                m.lora_B["default"].weight.mul_(2.0)
    with torch.no_grad():
        assert all(float(m.lora_B["default"].weight.abs().min()) > 0 for m in layers.values())
    shutil.rmtree(adir, ignore_errors=True)
    with quiet():
        pm.save_pretrained(adir)
    # save_pretrained also writes a model card (README.md, an empty template): not part
    # of the adapter format, and nothing reads it.
    os.remove(os.path.join(adir, "README.md"))
    for f in sorted(os.listdir(adir)):
        print(f"wrote {os.path.relpath(os.path.join(adir, f), os.getcwd())}", flush=True)
    return {"losses": losses, "lora_B_scale": b_scale}


def reference(family, key, cfg, names, feeds, adir, base_ort):
    """Reload the saved adapter onto a fresh base; unmerged torch logits, then
    merge_and_unload, export, onnxruntime."""
    with quiet():
        pm = PeftModel.from_pretrained(zoo.build_model(family), adir)
    pm.eval()
    modules = check_patterns(family, pm.peft_config["default"], lora_layers(pm), "default")
    unmerged = torch_logits(pm, feeds)
    with quiet():
        merged = pm.merge_and_unload()
    merged.eval()
    merged_torch = torch_logits(merged, feeds)
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "merged.onnx")
        export(merged, family, names, path)
        merged_ort = run_ort(path, feeds)
    keep = keep_mask(feeds)
    scale = float(np.max(np.abs(unmerged.astype(np.float64))[keep]))
    d_ort = max_abs(merged_ort, unmerged, keep)
    d_torch = max_abs(merged_torch, unmerged, keep)
    d_base = max_abs(merged_ort, base_ort, keep)
    assert d_ort / scale <= REL_TOL, (family, key, d_ort, scale)
    assert d_base >= MIN_LOGIT_DIFF * 0.9, (family, key, d_base)
    return merged_ort, {
        "r": cfg.r, "lora_alpha": cfg.lora_alpha, "use_rslora": cfg.use_rslora,
        "fan_in_fan_out": cfg.fan_in_fan_out,
        "target_modules": sorted(cfg.target_modules),
        "rank_pattern": dict(cfg.rank_pattern), "alpha_pattern": dict(cfg.alpha_pattern),
        "modules": modules,
        "max_abs_logits_diff_vs_base": d_base,
        "max_abs_merged_ort_vs_unmerged_torch": d_ort,
        "max_rel_merged_ort_vs_unmerged_torch": d_ort / scale,
        "max_abs_merged_torch_vs_unmerged_torch": d_torch,
    }


def run_family(family):
    out = os.path.join(HERE, family)
    shutil.rmtree(out, ignore_errors=True)
    for d in ("inputs", "outputs", "adapters"):
        os.makedirs(os.path.join(out, d))
    rel = lambda p: os.path.relpath(p, os.getcwd())  # noqa: E731
    names = zoo.optimum_input_names(family, "text-generation")
    feeds = zoo.plain_inputs(family, names)
    keep = keep_mask(feeds)

    base = zoo.build_model(family)
    m_path = os.path.join(out, "model.onnx")
    export(base, family, names, m_path)
    print(f"wrote {rel(m_path)}", flush=True)
    for k, v in feeds.items():
        p = os.path.join(out, "inputs", k + ".npy")
        np.save(p, v)
        print(f"wrote {rel(p)}", flush=True)
    base_ort = run_ort(m_path, feeds)
    base_torch = torch_logits(base, feeds)
    d_base = max_abs(base_ort, base_torch, keep)
    assert d_base / float(np.max(np.abs(base_torch)[keep])) <= REL_TOL, d_base
    p = os.path.join(out, "outputs", "logits_base.npy")
    np.save(p, base_ort)
    print(f"wrote {rel(p)}", flush=True)

    adapters = {}
    for i, (key, cfg) in enumerate(adapter_configs(family).items()):
        adir = os.path.join(out, "adapters", key)
        seed = zoo.family_seed(family) + 100 + 10 * i
        train_info = make_adapter(family, key, cfg, feeds, adir, seed)
        logits, info = reference(family, key, cfg, names, feeds, adir, base_ort)
        p = os.path.join(out, "outputs", f"logits_{key}.npy")
        np.save(p, logits)
        print(f"wrote {rel(p)}  (vs base {info['max_abs_logits_diff_vs_base']:.3f}, "
              f"merged ORT vs unmerged torch {info['max_abs_merged_ort_vs_unmerged_torch']:.2e} abs "
              f"{info['max_rel_merged_ort_vs_unmerged_torch']:.2e} rel)", flush=True)
        adapters[key] = {**info, "seed": seed, "train_steps": TRAIN_STEPS, "train_lr": TRAIN_LR,
                         "train_loss_first_last": [train_info["losses"][0],
                                                   train_info["losses"][-1]],
                         "lora_B_scaled_by": train_info["lora_B_scale"]}

    meta = {
        "family": family,
        "architecture": type(base).__name__,
        "base_linear_type": "transformers Conv1D (weight [in, out])" if family == "gpt2"
                            else "torch.nn.Linear (weight [out, in])",
        "exporter": "torch.onnx.export(dynamo=False), opset 17 (gen_zoo.export_legacy)",
        "inputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
        "input_names": names,
        "outputs": {"logits_base": "onnxruntime on model.onnx",
                    **{f"logits_{k}": f"onnxruntime on merge_and_unload() of adapters/{k}, "
                                      "exported like model.onnx" for k in adapters}},
        "ignore_positions": [[int(b), int(s)] for b, s in zip(*np.nonzero(~keep))],
        "base_max_abs_onnxruntime_vs_torch": d_base,
        "adapters": adapters,
        "versions": versions(),
    }
    p = os.path.join(out, "meta.json")
    with open(p, "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {rel(p)}", flush=True)


def checksums():
    out = {}
    for root, _, files in sorted(os.walk(HERE)):
        for f in sorted(files):
            p = os.path.join(root, f)
            if f.endswith((".npy", ".safetensors", ".onnx", ".json")):
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, HERE)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated families (default: llama,gpt2)")
    ap.add_argument("--sha256", action="store_true", help="print the files' sha256 at the end")
    args = ap.parse_args()
    fams = args.only.split(",") if args.only else FAMILIES
    for f in fams:
        if f not in FAMILIES:
            ap.error(f"unknown family {f}; known: {', '.join(FAMILIES)}")
    torch.set_num_threads(1)
    import transformers
    transformers.logging.set_verbosity_error()
    torch.use_deterministic_algorithms(True)
    for fam in fams:
        run_family(fam)
    if args.sha256:
        for k, v in checksums().items():
            print(f"{v}  {k}")


if __name__ == "__main__":
    main()
