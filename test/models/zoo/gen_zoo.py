#!/usr/bin/env python3
"""Generate the model zoo: tiny random-weight HuggingFace models exported to ONNX.

    .venv-fixtures/bin/python test/models/zoo/gen_zoo.py [--only FAMILY[,FAMILY...]]
                                                          [--exports legacy,dynamo,past,genai,genai-int4]
                                                          [--seeds DIR]

(scripts/setup_fixtures.sh creates .venv-fixtures.) For every family, builds a
tiny model from its transformers config class with fixed-seed random weights,
exports it, and writes one case folder per export:

    test/models/zoo/<family>-<export>/model.onnx      weights inline, no external data
    test/models/zoo/<family>-<export>/inputs/<name>.npy
    test/models/zoo/<family>-<export>/outputs/<name>.npy   onnxruntime (CPU EP) on model.onnx
    test/models/zoo/<family>-<export>/meta.json

Exports: legacy (torch.onnx.export dynamo=False, opset 17, plain forward),
dynamo (torch.onnx.export dynamo=True, its own opset), past (optimum-onnx's
text-generation-with-past, decoders only), genai (onnxruntime-genai's model
builder, fp32 CPU, the families it supports), genai-int4 (the same builder with
int4 weights: MatMulNBits). A failed export is written to
_failures.json (and left out of the zoo); the other cases go on. Deterministic:
the same package versions give the same files.

--seeds DIR writes only the ONNX files, DIR/<family>-<export>.onnx, at the
smaller sizes of SEED_SIZES (a few KB of weights each): the onnx-import fuzz
target's seeds (fuzz/corpus/onnx-import), whose size sets the fuzzer's rate.
No references, meta.json or summary are written.
"""
import argparse
import contextlib
import importlib.metadata as md
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "common"))
from hf_export import traceable_masks  # noqa: E402 (optimum's vmap-free masks)
SEED = 20250101
REL_TOL = 1e-4

# Shared tiny sizes.
H, L, NH, KVH, HD, FF, V, P = 64, 2, 4, 2, 16, 128, 128, 64
# --seeds: the same graphs at a fraction of the bytes (two layers still: Gemma-3's
# layer_types name two; GQA still: 2 query heads over 1 KV head).
SEED_SIZES = dict(H=16, L=2, NH=2, KVH=1, HD=8, FF=32, V=48, P=16)

DECODERS = ["gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3",
            "opt", "gpt_neox", "falcon", "granite", "stablelm",
            # Mixture of experts (top-k routing; qwen2_moe adds a gated shared expert).
            "mixtral", "qwen2_moe", "qwen3_moe",
            # ALiBi position biases instead of rotary.
            "bloom", "mpt",
            # Multi-query attention (one K/V head, fused c_attn).
            "gpt_bigcode",
            # Interleaved (GPT-J style) partial rotary; codegen with its mp_num-packed qkv.
            "gptj", "codegen",
            # Parallel attention + MLP over one norm (phi: partial rotary, cohere: interleaved).
            "phi", "cohere",
            # Partial rotary, layernorm1p, relu^2 MLP.
            "nemotron",
            # Second configurations of zoo families (other head layouts, rotary fractions).
            "llama_mqa", "gpt_neox_half", "falcon_gqa", "stablelm_quarter"]
ENCODERS = ["bert", "distilbert"]
FAMILIES = DECODERS + ENCODERS
# Families run through onnxruntime-genai's builder. It also takes mistral and phi3, but
# their graphs come out node for node like llama's (same ops, attributes and shapes), so
# they are left out to keep the zoo small.
GENAI_FAMILIES = ["llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "granite"]
# Families the builder exports again with int4 weights (-p int4 -e cpu: every linear a
# MatMulNBits, block 32), with the builder's extra options: qwen2 asymmetric (uint8 zero
# points), the others symmetric (the default: no zero points).
GENAI_INT4_FAMILIES = {"llama": [], "phi3": [], "qwen2": ["is_symmetric=false"]}
# torch (float32 weights) against onnxruntime on an int4 graph measures the quantization
# error, not a bug: `disagrees` for those cases means beyond this sanity bound (a wrong
# graph, e.g. the wrong LM head, is off by 1 or more).
INT4_TORCH_BOUND = 0.5

# Known reasons for a torch / onnxruntime disagreement, written into meta.json "notes".
NOTES = {
    "gemma2-genai": "builder (onnxruntime-genai 0.15.2) makes the odd layers local "
                    "(local_window_size=4) but transformers' Gemma-2 slides the even ones "
                    "(layer_types [sliding, full]): the windows sit on the wrong layers. With "
                    "layer_types swapped torch and onnxruntime agree to 5e-5, so GQA's "
                    "local_window_size means the same as transformers' sliding_window (the "
                    "5e-5 left: GQA applies softcap=50, transformers' sdpa path drops "
                    "attn_logit_softcapping). "
                    "The reference is onnxruntime on this graph, as for every case.",
    "gemma3-genai": "builder (onnxruntime-genai 0.15.2) hardcodes Gemma-3's 5-local-1-global "
                    "pattern and ignores config.layer_types [sliding, full]: both layers get "
                    "local_window_size=4 and the local rope theta (10000 instead of 1e6 on "
                    "layer 1). The reference is onnxruntime on this graph, as for every case.",
}
INT4_NOTE = ("int4 weights (MatMulNBits, block 32, accuracy_level 4 as the builder writes it "
             "for the CPU). The reference outputs are onnxruntime on this graph with "
             "accuracy_level 0: at 4 onnxruntime's CPU kernel quantizes the activations to int8 "
             "per block (onnxruntime_as_built_vs_reference says how far that is), at 0 it "
             "computes the op's definition, float32 activations times the dequantized weights, "
             "which is what qcc does (it dequantizes the weights at import). "
             "torch_vs_onnxruntime compares with torch's float32 weights: the int4 "
             "quantization error, held to a sanity bound of %g, not to %g."
             % (INT4_TORCH_BOUND, REL_TOL))
for _family in GENAI_INT4_FAMILIES:
    NOTES[f"{_family}-genai-int4"] = INT4_NOTE



def make_config(family):
    T = transformers
    common_llama = dict(vocab_size=V, hidden_size=H, intermediate_size=FF, num_hidden_layers=L,
                        num_attention_heads=NH, num_key_value_heads=KVH, head_dim=HD,
                        max_position_embeddings=P, tie_word_embeddings=False)
    if family == "gpt2":
        return T.GPT2Config(vocab_size=V, n_positions=P, n_embd=H, n_layer=L, n_head=NH, n_inner=FF,
                            bos_token_id=0, eos_token_id=0)
    if family == "llama":
        return T.LlamaConfig(**common_llama)
    if family == "mistral":
        return T.MistralConfig(**common_llama)
    if family == "qwen2":
        return T.Qwen2Config(**{k: v for k, v in common_llama.items() if k != "head_dim"})
    if family == "qwen3":
        return T.Qwen3Config(**common_llama)
    if family == "phi3":
        return T.Phi3Config(**{k: v for k, v in common_llama.items() if k != "head_dim"},
                            original_max_position_embeddings=P, pad_token_id=0,
                            bos_token_id=1, eos_token_id=2)
    if family == "gemma":
        return T.GemmaConfig(**{**common_llama, "tie_word_embeddings": True})
    if family == "gemma2":
        return T.Gemma2Config(**{**common_llama, "tie_word_embeddings": True},
                              query_pre_attn_scalar=HD, sliding_window=4)
    if family == "gemma3":
        return T.Gemma3TextConfig(**{**common_llama, "tie_word_embeddings": True},
                                  query_pre_attn_scalar=HD, sliding_window=4,
                                  layer_types=["sliding_attention", "full_attention"])
    if family == "opt":
        return T.OPTConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, ffn_dim=FF,
                           num_attention_heads=NH, max_position_embeddings=P,
                           word_embed_proj_dim=H, do_layer_norm_before=True,
                           pad_token_id=1, bos_token_id=2, eos_token_id=2)
    if family == "gpt_neox":
        return T.GPTNeoXConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                               num_attention_heads=NH, intermediate_size=FF,
                               max_position_embeddings=P, bos_token_id=0, eos_token_id=0)
    if family == "falcon":
        # Falcon-7B layout: multi-query attention (1 KV head), parallel attention/MLP.
        # (The GQA layout, new_decoder_architecture=True with num_kv_heads=2, exports
        # but optimum's with-past export of it fails: HF caches K/V broadcast to all
        # 4 heads while optimum's dummy past has 2.)
        return T.FalconConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                              num_attention_heads=NH, multi_query=True,
                              new_decoder_architecture=False, parallel_attn=True,
                              ffn_hidden_size=FF, max_position_embeddings=P,
                              bos_token_id=0, eos_token_id=0)
    if family == "granite":
        return T.GraniteConfig(**common_llama, embedding_multiplier=12.0,
                               residual_multiplier=0.22, attention_multiplier=1.0 / HD,
                               logits_scaling=8.0)
    if family == "stablelm":
        return T.StableLmConfig(**{k: v for k, v in common_llama.items() if k != "head_dim"})
    if family == "mixtral":
        return T.MixtralConfig(**common_llama, num_local_experts=4, num_experts_per_tok=2)
    if family == "qwen2_moe":
        return T.Qwen2MoeConfig(**{k: v for k, v in common_llama.items() if k != "head_dim"},
                                moe_intermediate_size=32, shared_expert_intermediate_size=64,
                                num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                                decoder_sparse_step=1, mlp_only_layers=[])
    if family == "qwen3_moe":
        return T.Qwen3MoeConfig(**common_llama, moe_intermediate_size=32, num_experts=4,
                                num_experts_per_tok=2, norm_topk_prob=True,
                                decoder_sparse_step=1, mlp_only_layers=[])
    if family == "bloom":
        return T.BloomConfig(vocab_size=V, hidden_size=H, n_layer=L, n_head=NH,
                             bos_token_id=0, eos_token_id=0)
    if family == "mpt":
        return T.MptConfig(vocab_size=V, d_model=H, n_layers=L, n_heads=NH, expansion_ratio=2,
                           max_seq_len=P)
    if family == "gpt_bigcode":
        return T.GPTBigCodeConfig(vocab_size=V, n_positions=P, n_embd=H, n_layer=L, n_head=NH,
                                  n_inner=FF, multi_query=True, bos_token_id=0, eos_token_id=0)
    if family == "gptj":
        return T.GPTJConfig(vocab_size=V, n_positions=P, n_embd=H, n_layer=L, n_head=NH,
                            rotary_dim=8, n_inner=FF, bos_token_id=0, eos_token_id=0)
    if family == "codegen":
        return T.CodeGenConfig(vocab_size=V, n_positions=P, n_ctx=P, n_embd=H, n_layer=L,
                               n_head=NH, rotary_dim=8, n_inner=FF, bos_token_id=0,
                               eos_token_id=0)
    if family == "phi":
        return T.PhiConfig(vocab_size=V, hidden_size=H, intermediate_size=FF,
                           num_hidden_layers=L, num_attention_heads=NH, num_key_value_heads=NH,
                           partial_rotary_factor=0.5, max_position_embeddings=P,
                           bos_token_id=0, eos_token_id=0)
    if family == "cohere":
        return T.CohereConfig(**{k: v for k, v in common_llama.items() if k != "head_dim"},
                              logit_scale=0.5, use_qk_norm=False, bos_token_id=0,
                              eos_token_id=0, pad_token_id=0)
    if family == "nemotron":
        return T.NemotronConfig(**common_llama, partial_rotary_factor=0.5,
                                bos_token_id=0, eos_token_id=0)
    if family == "llama_mqa":  # one KV head, head_dim 32 (hidden 64 = 2 x 32)
        return T.LlamaConfig(**{**common_llama, "num_attention_heads": 2,
                                "num_key_value_heads": 1, "head_dim": 32},
                             attention_bias=True, mlp_bias=True)
    if family == "gpt_neox_half":
        return T.GPTNeoXConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                               num_attention_heads=2, intermediate_size=FF, rotary_pct=0.5,
                               use_parallel_residual=False, max_position_embeddings=P,
                               bos_token_id=0, eos_token_id=0)
    if family == "falcon_gqa":
        return T.FalconConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                              num_attention_heads=NH, num_kv_heads=KVH,
                              new_decoder_architecture=True, parallel_attn=True,
                              ffn_hidden_size=FF, max_position_embeddings=P,
                              bos_token_id=0, eos_token_id=0)
    if family == "stablelm_quarter":
        return T.StableLmConfig(**{k: v for k, v in common_llama.items() if k != "head_dim"},
                                partial_rotary_factor=0.25, use_qkv_bias=True)
    if family == "bert":
        return T.BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                            num_attention_heads=NH, intermediate_size=FF,
                            max_position_embeddings=P)
    if family == "distilbert":
        return T.DistilBertConfig(vocab_size=V, dim=H, n_layers=L, n_heads=NH, hidden_dim=FF,
                                  max_position_embeddings=P)
    raise ValueError(family)


def family_seed(family):
    return SEED + zlib.crc32(family.encode()) % 100000


def build_model(family):
    config = make_config(family)
    torch.manual_seed(family_seed(family))
    if family == "bert":
        model = transformers.BertModel(config, add_pooling_layer=False)
    elif family == "distilbert":
        model = transformers.DistilBertModel(config)
    elif family == "gemma3":
        model = transformers.Gemma3ForCausalLM(config)
    else:
        model = transformers.AutoModelForCausalLM.from_config(config)
    reinit(model, family_seed(family) + 1)
    model.eval()
    return model


def reinit(model, seed):
    """HF's init (std 0.02) gives near-uniform attention and near-zero logits; use
    N(0, 1/fan_in) projections, N(0, 1) embeddings, norm weights near their identity
    value and small biases so every part of the graph matters to the outputs."""
    from transformers.pytorch_utils import Conv1D
    g = torch.Generator().manual_seed(seed)
    done = set()
    with torch.no_grad():
        for name, mod in model.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                if id(p) in done:
                    continue
                done.add(id(p))
                if isinstance(mod, torch.nn.Linear) and pname == "weight":
                    p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
                elif isinstance(mod, Conv1D) and pname == "weight":
                    p.copy_(torch.randn(p.shape, generator=g) / p.shape[0] ** 0.5)
                elif isinstance(mod, torch.nn.Embedding):
                    p.copy_(torch.randn(p.shape, generator=g))
                elif pname == "bias":
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
                elif p.dim() == 1:
                    # Norm scales: gemma-style norms multiply by (1 + w), others by w.
                    center = 0.0 if "gemma" in type(mod).__name__.lower() else 1.0
                    p.copy_(center + 0.1 * torch.randn(p.shape, generator=g))
                else:
                    p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


# ---------------------------------------------------------------- inputs

B, S = 2, 7
PAST, NEW = 5, 2


def decoder_mask_positions(total):
    mask = np.ones((B, total), dtype=np.int64)
    mask[1, :3] = 0  # second row left-padded by 3
    pos = np.cumsum(mask, axis=1) - 1
    pos[mask == 0] = 1  # as transformers' generate() does
    return mask, pos.astype(np.int64)


def plain_inputs(family, names):
    rng = np.random.default_rng(family_seed(family) + 2)
    feeds = {"input_ids": rng.integers(0, V, size=(B, S), dtype=np.int64)}
    if family in ENCODERS:
        mask = np.ones((B, S), dtype=np.int64)
        mask[1, S - 2:] = 0  # second row right-padded by 2
        feeds["attention_mask"] = mask
        if "token_type_ids" in names:
            tt = np.zeros((B, S), dtype=np.int64)
            tt[:, 4:] = 1
            feeds["token_type_ids"] = tt
    else:
        mask, pos = decoder_mask_positions(S)
        feeds["attention_mask"] = mask
        if "position_ids" in names:
            feeds["position_ids"] = pos
    return {k: feeds[k] for k in names}


def optimum_input_names(family, task):
    import optimum.exporters.onnx.model_configs  # noqa: F401 (registers the configs)
    from optimum.exporters.tasks import TasksManager
    model_type = make_config(family).model_type
    if model_type not in TasksManager._SUPPORTED_MODEL_TYPE:
        # optimum-onnx has no config for it (mixtral, qwen2_moe): a LLaMA-like decoder's
        # inputs; its with-past export fails and is recorded in _failures.json.
        return ["input_ids", "attention_mask", "position_ids"]
    ctor = TasksManager.get_exporter_config_constructor(
        exporter="onnx", model_type=model_type, task=task, library_name="transformers")
    return list(ctor(make_config(family)).inputs.keys())


# ---------------------------------------------------------------- torch side

class PlainWrapper(torch.nn.Module):
    def __init__(self, model, names, encoder):
        super().__init__()
        self.model, self.names, self.encoder = model, names, encoder

    def forward(self, input_ids, attention_mask, extra=None):
        kw = {"input_ids": input_ids, "attention_mask": attention_mask}
        if extra is not None:
            kw[self.names[2]] = extra
        if self.encoder:
            return self.model(**kw).last_hidden_state
        return self.model(**kw, use_cache=False).logits


def torch_plain(model, family, feeds):
    with torch.no_grad():
        kw = {k: torch.from_numpy(v) for k, v in feeds.items()}
        if family in ENCODERS:
            return {"last_hidden_state": model(**kw).last_hidden_state.numpy()}
        return {"logits": model(**kw, use_cache=False).logits.numpy()}


def torch_past(model, feeds, n_layers):
    from transformers import DynamicCache
    legacy = tuple((torch.from_numpy(feeds[f"past_key_values.{i}.key"]),
                    torch.from_numpy(feeds[f"past_key_values.{i}.value"])) for i in range(n_layers))
    cache = DynamicCache.from_legacy_cache(legacy)
    kw = {k: torch.from_numpy(v.astype(np.int64)) for k, v in feeds.items()
          if not k.startswith("past_key_values")}
    with torch.no_grad():
        out = model(**kw, past_key_values=cache, use_cache=True)
    res = {"logits": out.logits.numpy()}
    pkv = out.past_key_values
    for i in range(n_layers):
        k, v = (pkv.layers[i].keys, pkv.layers[i].values) if hasattr(pkv, "layers") else pkv[i]
        res[f"present.{i}.key"] = k.numpy()
        res[f"present.{i}.value"] = v.numpy()
    return res


# ---------------------------------------------------------------- exports

def export_legacy(model, family, names, path):
    encoder = family in ENCODERS
    wrapper = PlainWrapper(model, names, encoder).eval()
    feeds = plain_inputs(family, names)
    args = tuple(torch.from_numpy(feeds[n]) for n in names)
    out = "last_hidden_state" if encoder else "logits"
    axes = {n: {0: "batch", 1: "seq"} for n in names + [out]}
    with torch.no_grad(), traceable_masks():
        torch.onnx.export(wrapper, args, path, dynamo=False, opset_version=17,
                          input_names=names, output_names=[out], dynamic_axes=axes,
                          do_constant_folding=True)
    return feeds, torch_plain(model, family, feeds), {"exporter": "torch.onnx.export(dynamo=False)"}


def export_dynamo(model, family, names, path):
    encoder = family in ENCODERS
    wrapper = PlainWrapper(model, names, encoder).eval()
    feeds = plain_inputs(family, names)
    args = tuple(torch.from_numpy(feeds[n]) for n in names)
    out = "last_hidden_state" if encoder else "logits"
    batch, seq = torch.export.Dim("batch", max=1024), torch.export.Dim("seq", max=P)
    dyn = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}}
    if len(names) > 2:
        dyn["extra"] = {0: batch, 1: seq}
    with torch.no_grad():
        prog = torch.onnx.export(wrapper, args, dynamo=True, input_names=names,
                                 output_names=[out], dynamic_shapes=dyn, external_data=False)
    prog.save(path, external_data=False)
    # Drop the exporter's per-node metadata (stack traces with local paths, FX node
    # text): a third of the file, and it would make the bytes machine-dependent.
    m = onnx.load(path)
    for n in m.graph.node:
        del n.metadata_props[:]
        n.doc_string = ""
    onnx.save(m, path, save_as_external_data=False)
    return feeds, torch_plain(model, family, feeds), {"exporter": "torch.onnx.export(dynamo=True)"}


def export_past(model, family, path, hf_dir):
    from optimum.exporters.onnx import main_export
    with tempfile.TemporaryDirectory() as out_dir:
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            main_export(hf_dir, out_dir, task="text-generation-with-past", device="cpu",
                        do_validation=False, library_name="transformers", local_files_only=True)
        files = sorted(os.listdir(out_dir))
        onnx_files = [f for f in files if f.endswith(".onnx")]
        if onnx_files != ["model.onnx"]:
            raise RuntimeError(f"optimum wrote {onnx_files}, expected model.onnx")
        m = onnx.load(os.path.join(out_dir, "model.onnx"))  # pulls external data in
        onnx.save(m, path, save_as_external_data=False)
    feeds = past_inputs(family, path)
    n_layers = len([k for k in feeds if k.startswith("past_key_values") and k.endswith(".key")])
    ref = torch_past(model, feeds, n_layers)
    return feeds, ref, {"exporter": "optimum main_export(task=text-generation-with-past)"}


def past_inputs(family, path):
    """Inputs for a with-past graph: past length 5, 2 new tokens, second row's first 3
    (past) positions padding; past K/V random N(0, 1) of the graph's static dims."""
    rng = np.random.default_rng(family_seed(family) + 3)
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    mask, pos = decoder_mask_positions(PAST + NEW)
    feeds = {}
    for gi in m.graph.input:
        if gi.name in inits:
            continue
        if gi.name == "input_ids":
            feeds[gi.name] = rng.integers(0, V, size=(B, NEW), dtype=np.int64)
        elif gi.name == "attention_mask":
            feeds[gi.name] = mask
        elif gi.name == "position_ids":
            feeds[gi.name] = pos[:, PAST:].copy()
        elif gi.name.startswith("past_key_values"):
            dims = gi.type.tensor_type.shape.dim
            shape = [d.dim_value if d.HasField("dim_value") else None for d in dims]
            # dynamic dims: batch first, past sequence length otherwise
            shape = [s if s is not None else (B if i == 0 else PAST) for i, s in enumerate(shape)]
            feeds[gi.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            raise RuntimeError(f"unexpected input {gi.name}")
    return feeds


# Runs `python -m onnxruntime_genai.models.builder ARGS` with one fix: the builder takes
# any nn.Linear with out_features == vocab_size for the LM head, and the zoo's
# intermediate size equals its vocabulary (128), so the MLP's gate/up projections of
# every layer would become the LM head. Take the model's own lm_head module when it
# has one.
GENAI_DRIVER = """
import runpy, sys
import onnxruntime_genai.models  # puts its folder on sys.path: builder.py imports `builders`
from builders import base
_orig = base.Model.has_lm_head
def has_lm_head(self, module):
    head = getattr(self.weights, "lm_head", None)
    return module is head if head is not None else _orig(self, module)
base.Model.has_lm_head = has_lm_head
sys.argv[0] = "builder"
runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")
"""


def export_genai(model, family, path, hf_dir, precision="fp32", extra_options=()):
    with tempfile.TemporaryDirectory() as out_dir, tempfile.TemporaryDirectory() as cache:
        args = ["-p", precision, "-e", "cpu"]
        if extra_options:
            args += ["--extra_options", *extra_options]
        cmd = [sys.executable, "-c", GENAI_DRIVER, "-i", hf_dir, "-o", out_dir, "-c", cache, *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            lines = [x for x in (r.stderr + r.stdout).strip().splitlines() if x.strip()]
            raise RuntimeError(lines[-1] if lines else f"builder exited {r.returncode}")
        src = os.path.join(out_dir, "model.onnx")
        m = onnx.load(src)
        onnx.save(m, path, save_as_external_data=False)
        with open(os.path.join(out_dir, "genai_config.json")) as f:
            genai_cfg = json.load(f)
    feeds = genai_inputs(family, path)
    n_layers = len([k for k in feeds if k.startswith("past_key_values") and k.endswith(".key")])
    ref = torch_past(model, feeds, n_layers)
    return feeds, ref, {"exporter": "python -m onnxruntime_genai.models.builder " + " ".join(args),
                        "genai_search": genai_cfg.get("search", {}).get("past_present_share_buffer")}


def genai_inputs(family, path):
    """Like past_inputs, but no padding: GroupQueryAttention reads the mask as per-row
    key counts (ReduceSum(mask) - 1), i.e. it assumes right-padded K/V buffers, which
    does not match transformers' left padding. All-ones mask over past + new. One new
    token: GroupQueryAttention refuses batch > 1 with past and more than one new token."""
    NEW = 1  # noqa: N806
    rng = np.random.default_rng(family_seed(family) + 3)
    m = onnx.load(path, load_external_data=False)
    feeds = {}
    for gi in m.graph.input:
        t = gi.type.tensor_type
        np_type = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if gi.name == "input_ids":
            feeds[gi.name] = rng.integers(0, V, size=(B, NEW)).astype(np_type)
        elif gi.name == "attention_mask":
            feeds[gi.name] = np.ones((B, PAST + NEW), dtype=np_type)
        elif gi.name == "position_ids":
            feeds[gi.name] = np.tile(np.arange(PAST, PAST + NEW), (B, 1)).astype(np_type)
        elif gi.name.startswith("past_key_values"):
            shape = []
            for i, d in enumerate(t.shape.dim):
                if d.HasField("dim_value"):
                    shape.append(d.dim_value)
                elif "batch" in d.dim_param or i == 0:
                    shape.append(B)
                elif "past" in d.dim_param or "seq" in d.dim_param:
                    shape.append(PAST)
                else:  # kv_cache_dim
                    shape.append(HD)
            feeds[gi.name] = rng.standard_normal(shape).astype(np_type)
        else:
            raise RuntimeError(f"unexpected input {gi.name}")
    return feeds


# ---------------------------------------------------------------- bookkeeping

def op_histogram(m):
    hist = {}

    def walk(graph):
        for n in graph.node:
            key = f"{n.domain or 'ai.onnx'}::{n.op_type}"
            hist[key] = hist.get(key, 0) + 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sg in a.graphs:
                        walk(sg)
    walk(m.graph)
    for f in m.functions:
        walk(f)
    return dict(sorted(hist.items()))


def ignored_positions(kind, family, feeds):
    """(batch, seq) positions whose outputs are undefined: left-padding query tokens of
    a decoder attend to no key at all (every key masked), so each implementation puts
    whatever it likes there (uniform attention, zeros, ...). Excluded from every check."""
    if family in ENCODERS or "attention_mask" not in feeds:
        return []
    mask = feeds["attention_mask"]
    n_new = feeds["input_ids"].shape[1]
    q = mask[:, mask.shape[1] - n_new:]
    return [[int(b), int(s)] for b, s in zip(*np.nonzero(q == 0))]


def masked(a, ignore):
    a = a.astype(np.float64)
    if ignore and a.ndim >= 2 and a.shape[:2] == (B, a.shape[1]):
        keep = np.ones(a.shape[:2], dtype=bool)
        for b, s in ignore:
            if s < a.shape[1]:
                keep[b, s] = False
        return a[keep]
    return a


def compare(ref, got, ignore_by_output):
    res = {}
    for k, r in ref.items():
        g = got.get(k)
        if g is None:
            res[k] = {"error": "missing in onnxruntime outputs"}
            continue
        if g.shape != r.shape:
            res[k] = {"error": f"shape torch {list(r.shape)} vs onnxruntime {list(g.shape)}"}
            continue
        ig = ignore_by_output.get(k, [])
        gm, rm = masked(g, ig), masked(r, ig)
        diff = float(np.max(np.abs(gm - rm)))
        scale = float(np.max(np.abs(rm)))
        res[k] = {"max_abs": diff, "max_rel": diff / max(scale, 1e-6)}
        if ig:
            full = float(np.max(np.abs(g.astype(np.float64) - r.astype(np.float64))))
            res[k]["max_abs_incl_ignored"] = full
    return res


def versions():
    out = {}
    for n in ["torch", "transformers", "optimum", "optimum-onnx", "onnx", "onnxruntime",
              "onnxscript", "onnxruntime-genai", "numpy"]:
        try:
            out[n] = md.version(n)
        except md.PackageNotFoundError:
            pass
    return out


def float_activations(m):
    """`m` serialized with every MatMulNBits at accuracy_level 0 (float32 activations)."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    for n in m2.graph.node:
        if n.op_type == "MatMulNBits":
            for a in n.attribute:
                if a.name == "accuracy_level":
                    a.i = 0
    return m2.SerializeToString()


def run_ort(model, feeds):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def write_case(case_dir, family, kind, model, m_path, feeds, ref, extra, attn_impl):
    m = onnx.load(m_path)
    try:
        onnx.checker.check_model(m)
        checker = "ok"
    except onnx.checker.ValidationError as e:  # e.g. ORT's SimplifiedLayerNormalization
        checker = (str(e).strip().splitlines() or ["failed"])[0]
    outs = run_ort(m_path, feeds)
    torch_tol = REL_TOL
    if kind == "genai-int4":  # reference: float32 activations (INT4_NOTE)
        as_built = outs
        outs = run_ort(float_activations(m), feeds)
        extra = {**extra, "onnxruntime_as_built_vs_reference": compare(outs, as_built, {})}
        torch_tol = INT4_TORCH_BOUND
    for d in ("inputs", "outputs"):
        os.makedirs(os.path.join(case_dir, d), exist_ok=True)
    for k, v in feeds.items():
        np.save(os.path.join(case_dir, "inputs", k + ".npy"), v)
    for k, v in outs.items():
        np.save(os.path.join(case_dir, "outputs", k + ".npy"), v)
    ignore = ignored_positions(kind, family, feeds)
    # Only outputs indexed [batch, new token, ...] carry the undefined rows.
    ignore_by_output = {k: ignore for k in outs if k in ("logits", "last_hidden_state")} if ignore else {}
    agree = compare(ref, outs, ignore_by_output)
    worst = max((a.get("max_rel", float("inf")) for a in agree.values()), default=None)
    nonfinite = [k for k, v in outs.items() if not np.all(np.isfinite(v))]
    cfg = model.config
    meta = {
        "family": family,
        "export": kind,
        "architecture": type(model).__name__,
        "model_type": cfg.model_type,
        "attn_implementation": attn_impl,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
        "ir_version": m.ir_version,
        "onnx_checker": checker,
        "inputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
        "outputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in outs.items()},
        "torch_vs_onnxruntime": agree,
        "max_rel_torch_vs_onnxruntime": worst,
        "disagrees": bool(worst is None or worst > torch_tol),
        "nonfinite_outputs": nonfinite,
        "ignore_positions": ignore_by_output,
        "op_histogram": op_histogram(m),
        "file_bytes": os.path.getsize(m_path),
        "config": {k: v for k, v in cfg.to_diff_dict().items()
                   if k not in ("transformers_version", "architectures", "_name_or_path")},
        "versions": versions(),
        **extra,
    }
    if f"{family}-{kind}" in NOTES:
        meta["notes"] = NOTES[f"{family}-{kind}"]
    with open(os.path.join(case_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True, default=str)
        f.write("\n")
    return meta


def save_tokenizer(hf_dir):
    """A word-level tokenizer over V made-up tokens: the exporters want one beside the
    weights (the model builder saves it with the model); the zoo never tokenizes."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(V)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0",
                                                bos_token="t1", eos_token="t2", pad_token="t0")
    fast.save_pretrained(hf_dir)


def run_family(family, exports, failures, seeds_dir=None):
    is_dec = family in DECODERS
    model = build_model(family)
    attn_impl = getattr(model.config, "_attn_implementation", None)
    task = "text-generation" if is_dec else "feature-extraction"
    names = optimum_input_names(family, task)
    with tempfile.TemporaryDirectory() as hf_dir:
        model.save_pretrained(hf_dir, safe_serialization=True)
        save_tokenizer(hf_dir)
        kinds = [k for k in exports if is_dec or k in ("legacy", "dynamo")]
        if "genai" in kinds and family not in GENAI_FAMILIES:
            kinds.remove("genai")
        if "genai-int4" in kinds and family not in GENAI_INT4_FAMILIES:
            kinds.remove("genai-int4")
        for kind in kinds:
            case = f"{family}-{kind}"
            case_dir = os.path.join(seeds_dir or HERE, case)
            shutil.rmtree(case_dir, ignore_errors=True)
            os.makedirs(case_dir)
            path = os.path.join(case_dir, "model.onnx")
            try:
                torch.manual_seed(0)
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    if kind == "legacy":
                        r = export_legacy(model, family, names, path)
                    elif kind == "dynamo":
                        r = export_dynamo(model, family, names, path)
                    elif kind == "past":
                        r = export_past(model, family, path, hf_dir)
                    elif kind == "genai":
                        r = export_genai(model, family, path, hf_dir)
                    elif kind == "genai-int4":
                        r = export_genai(model, family, path, hf_dir, "int4",
                                         GENAI_INT4_FAMILIES[family])
                if seeds_dir:
                    dst = os.path.join(seeds_dir, case + ".onnx")
                    shutil.move(path, dst)
                    shutil.rmtree(case_dir)
                    print(f"{case}: {os.path.getsize(dst)} bytes", flush=True)
                    continue
                meta = write_case(case_dir, family, kind, model, path, *r, attn_impl)
                failures.pop(case, None)
                flag = " DISAGREES" if meta["disagrees"] else ""
                print(f"{case}: ok, opsets {meta['opsets']}, {meta['file_bytes'] // 1024} KiB, "
                      f"torch vs ort max rel {meta['max_rel_torch_vs_onnxruntime']:.2e}{flag}",
                      flush=True)
            except Exception as e:  # noqa: BLE001 - record and go on
                shutil.rmtree(case_dir, ignore_errors=True)
                text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # the exporters' colours
                msg = (text.strip().splitlines() or [type(e).__name__])[0][:300]
                failures[case] = f"{type(e).__name__}: {msg}"
                print(f"{case}: FAILED {failures[case]}", flush=True)
                if os.environ.get("ZOO_TRACE"):
                    traceback.print_exc()


KINDS = ["legacy", "dynamo", "past", "genai", "genai-int4"]
BEGIN, END = "<!-- zoo-summary:begin -->", "<!-- zoo-summary:end -->"


def summary_markdown():
    """Tables built from every case's meta.json (cases, op types across the zoo)."""
    metas = []
    for d in sorted(os.listdir(HERE)):
        mp = os.path.join(HERE, d, "meta.json")
        if os.path.isfile(mp):
            with open(mp) as f:
                metas.append((d, json.load(f)))
    order = {f: i for i, f in enumerate(FAMILIES)}
    metas.sort(key=lambda x: (order.get(x[1]["family"], 99), KINDS.index(x[1]["export"])))
    total = 0
    for root, _, files in os.walk(HERE):
        if os.path.relpath(root, HERE) != ".":
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    out = [f"{len(metas)} cases, {total / 1e6:.1f} MB in the case folders "
           f"(model.onnx files: {sum(m['file_bytes'] for _, m in metas) / 1e6:.1f} MB).", ""]
    out += ["| case | opsets | inputs | outputs | nodes | op types | KiB | torch vs ORT (max rel) |",
            "|---|---|---|---|---|---|---|---|"]
    for d, m in metas:
        ops = ", ".join(f"{k} {v}" for k, v in sorted(m["opsets"].items()))
        ins = ", ".join(f"{k} {'x'.join(map(str, v['shape']))}" for k, v in m["inputs"].items()
                        if not k.startswith("past_key_values"))
        n_past = sum(k.startswith("past_key_values") for k in m["inputs"])
        if n_past:
            shp = next(v["shape"] for k, v in m["inputs"].items() if k.startswith("past_key_values"))
            ins += f", {n_past} past_key_values {'x'.join(map(str, shp))}"
        outs = ", ".join(k for k in m["outputs"] if not k.startswith("present"))
        n_pres = sum(k.startswith("present") for k in m["outputs"])
        if n_pres:
            outs += f", {n_pres} present"
        n_nodes = sum(m["op_histogram"].values())
        err = m["max_rel_torch_vs_onnxruntime"]
        flag = f"{err:.1e}" + (" **DISAGREES** (see meta.json notes)" if m["disagrees"] else "")
        out.append(f"| {d} | {ops} | {ins} | {outs} | {n_nodes} | {len(m['op_histogram'])} | "
                   f"{m['file_bytes'] // 1024} | {flag} |")
    uses = {}
    for d, m in metas:
        for op in m["op_histogram"]:
            uses.setdefault(op, []).append(m["export"])
    out += ["", f"Op types across the zoo ({len(uses)}; domain::op, number of cases using it, "
                "by export kind):", "",
            "| op | cases | " + " | ".join(KINDS) + " |", "|---|---|" + "---|" * len(KINDS)]
    for op, ks in sorted(uses.items(), key=lambda x: (-len(x[1]), x[0])):
        out.append(f"| {op} | {len(ks)} | " + " | ".join(str(ks.count(k) or "") for k in KINDS) + " |")
    return "\n".join(out)


def write_summary():
    readme = os.path.join(HERE, "README.md")
    with open(readme) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(readme, "w") as f:
        f.write(head + BEGIN + "\n" + summary_markdown() + "\n" + END + tail)
    print(f"updated {readme}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated families (default: all)")
    ap.add_argument("--exports", default=",".join(KINDS),
                    help="comma-separated export kinds (default: %(default)s)")
    ap.add_argument("--summary", action="store_true",
                    help="only rewrite the tables in README.md from the cases' meta.json")
    ap.add_argument("--seeds", metavar="DIR",
                    help="write only DIR/<case>.onnx at SEED_SIZES (the fuzz seeds)")
    args = ap.parse_args()
    if args.summary:
        write_summary()
        return
    fams = args.only.split(",") if args.only else FAMILIES
    for f in fams:
        if f not in FAMILIES:
            ap.error(f"unknown family {f}; known: {', '.join(FAMILIES)}")
    exports = args.exports.split(",")
    torch.set_num_threads(2)
    fail_path = os.path.join(HERE, "_failures.json")
    failures = {}
    if os.path.exists(fail_path):
        with open(fail_path) as f:
            failures = json.load(f)
    if args.seeds:
        globals().update(SEED_SIZES)
        os.makedirs(args.seeds, exist_ok=True)
        for fam in fams:
            run_family(fam, exports, {}, args.seeds)
        return
    for fam in fams:
        run_family(fam, exports, failures)
    with open(fail_path, "w") as f:
        json.dump(dict(sorted(failures.items())), f, indent=1)
        f.write("\n")
    write_summary()


if __name__ == "__main__":
    main()
