#!/usr/bin/env python3
"""Generate the qcc ONNX model fixtures with a real exporter (torch.onnx.export).

Run from the repository root:

    /usr/bin/python3 test/models/gen_fixtures.py

Produces, next to this script:
    gpt2.onnx   GPT-2-style decoder   (input_ids -> logits)
    llama.onnx  LLaMA-style decoder   (input_ids -> logits)
    bert.onnx   BERT-style encoder    (input_ids, attention_mask -> last_hidden_state)
    gpt2_past.onnx  gpt2.onnx's model and weights with HF's explicit cache
                (input_ids, past.{i}.key/value -> logits, present.{i}.key/value);
                written last so that the three above keep their bytes

The modules below are hand-written re-implementations that follow the
HuggingFace `transformers` code paths closely (so the exported graphs contain
the same ONNX patterns a real HF export does); `transformers` is not imported.
All weights are random but deterministic (fixed torch.manual_seed per model).

Requires torch (tested with 1.13) and onnx (tested with 1.12).  If
onnxruntime is importable the exported models are also run and compared
against the PyTorch outputs; otherwise only onnx.checker is used.
"""

import collections
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import onnx

OUT_DIR = os.path.dirname(os.path.abspath(__file__))
OPSET = 17

VOCAB = 256
HIDDEN = 64
LAYERS = 2
MAX_POS = 128


def init_weights(model):
    """Deterministic random init (call after torch.manual_seed).

    Scaled so activations stay O(1): projection weights ~ N(0, 1/fan_in),
    so attention scores are far from uniform and numeric bugs in a compiler
    (wrong mask, scale, rotary, head split) change the outputs visibly.
    Norm scales ~ N(1, 0.1^2), all biases ~ N(0, 0.05^2), embeddings ~ N(0, 0.5^2).
    Parameters are visited in registration order (tied weights once).
    """
    embedding_weights = [m.weight for m in model.modules() if isinstance(m, nn.Embedding)]
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.Embedding):
                mod.weight.normal_(0.0, 0.5)
            elif isinstance(mod, (nn.LayerNorm, LlamaRMSNorm)):
                mod.weight.normal_(1.0, 0.1)
                if getattr(mod, "bias", None) is not None:
                    mod.bias.normal_(0.0, 0.05)
            elif isinstance(mod, nn.Linear):
                if any(mod.weight is w for w in embedding_weights):
                    continue  # GPT-2 lm_head tied to wte: already initialised as an embedding
                mod.weight.normal_(0.0, 1.0 / math.sqrt(mod.in_features))
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.05)
            elif isinstance(mod, Conv1D):
                mod.weight.normal_(0.0, 1.0 / math.sqrt(mod.weight.shape[0]))
                mod.bias.normal_(0.0, 0.05)


# ----------------------------------------------------------------------------
# GPT-2 (after transformers/models/gpt2/modeling_gpt2.py)
# ----------------------------------------------------------------------------

class Conv1D(nn.Module):
    """HF transformers.pytorch_utils.Conv1D: a linear layer with transposed
    weight [nx, nf], implemented with addmm on a 2-D view."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


def gelu_new(x):
    # HF NewGELUActivation (tanh approximation).
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, hidden, n_head, max_pos):
        super().__init__()
        self.embed_dim = hidden
        self.num_heads = n_head
        self.head_dim = hidden // n_head
        self.split_size = hidden
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_pos, max_pos), dtype=torch.bool)).view(1, 1, max_pos, max_pos),
            persistent=False,
        )
        self.c_attn = Conv1D(3 * hidden, hidden)
        self.c_proj = Conv1D(hidden, hidden)

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / math.sqrt(value.size(-1))  # python float divisor

        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)

        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output

    def forward(self, hidden_states, layer_past=None):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        if layer_past is not None:
            # HF GPT-2 with use_cache: the cache is [batch, head, past, head_dim].
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        present = (key, value)
        attn_output = self._attn(query, key, value)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        if layer_past is None:
            return attn_output
        return attn_output, present


class GPT2MLP(nn.Module):
    def __init__(self, intermediate, hidden):
        super().__init__()
        self.c_fc = Conv1D(intermediate, hidden)
        self.c_proj = Conv1D(hidden, intermediate)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = gelu_new(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, hidden, n_head, max_pos, eps=1e-5):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.attn = GPT2Attention(hidden, n_head, max_pos)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.mlp = GPT2MLP(4 * hidden, hidden)

    def forward(self, hidden_states, layer_past=None):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        if layer_past is None:
            attn_output = self.attn(hidden_states)
        else:
            attn_output, present = self.attn(hidden_states, layer_past)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        if layer_past is None:
            return hidden_states
        return hidden_states, present


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab=VOCAB, hidden=HIDDEN, n_layer=LAYERS, n_head=4, max_pos=MAX_POS):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_pos, hidden)
        self.h = nn.ModuleList([GPT2Block(hidden, n_head, max_pos) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        # lm_head is tied to wte (no bias): logits = hidden @ wte.weight.T
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        init_weights(self)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        position_ids = torch.arange(0, input_shape[-1], dtype=torch.long, device=input_ids.device)
        position_ids = position_ids.unsqueeze(0)
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        for block in self.h:
            hidden_states = block(hidden_states)
        hidden_states = self.ln_f(hidden_states)
        lm_logits = self.lm_head(hidden_states)
        return lm_logits


class GPT2LMHeadModelWithPast(GPT2LMHeadModel):
    """GPT2LMHeadModel with HF's explicit cache (use_cache=True): takes the
    past keys/values of every layer, flattened as (key_0, value_0, key_1,
    ...) each [batch, head, past, head_dim], and returns the logits followed
    by the presents (the past with this call's keys/values appended)."""

    def forward(self, input_ids, *past_flat):
        past_key_values = [(past_flat[2 * i], past_flat[2 * i + 1]) for i in range(len(self.h))]
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        past_length = past_key_values[0][0].size(-2)
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long,
                                    device=input_ids.device)
        position_ids = position_ids.unsqueeze(0)
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        presents = []
        for block, layer_past in zip(self.h, past_key_values):
            hidden_states, present = block(hidden_states, layer_past)
            presents.extend(present)
        hidden_states = self.ln_f(hidden_states)
        lm_logits = self.lm_head(hidden_states)
        return (lm_logits, *presents)


# ----------------------------------------------------------------------------
# LLaMA (after transformers/models/llama/modeling_llama.py, ~v4.30)
# ----------------------------------------------------------------------------

class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, seq_len):
        t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)  # [seq, head_dim]


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos[None, None, :, :]  # [1, 1, seq, dim] broadcasts against [bs, heads, seq, dim]
    sin = sin[None, None, :, :]
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaMLP(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    def __init__(self, hidden, n_heads, n_kv_heads):
        super().__init__()
        self.hidden_size = hidden
        self.num_heads = n_heads
        self.head_dim = hidden // n_heads
        self.num_key_value_heads = n_kv_heads
        self.num_key_value_groups = n_heads // n_kv_heads
        self.q_proj = nn.Linear(hidden, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * self.head_dim, hidden, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim)

    def forward(self, hidden_states, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        kv_seq_len = key_states.shape[-2]
        cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask

        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)

        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        attn_output = self.o_proj(attn_output)
        return attn_output


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden, n_heads, n_kv_heads, intermediate, eps):
        super().__init__()
        self.self_attn = LlamaAttention(hidden, n_heads, n_kv_heads)
        self.mlp = LlamaMLP(hidden, intermediate)
        self.input_layernorm = LlamaRMSNorm(hidden, eps=eps)
        self.post_attention_layernorm = LlamaRMSNorm(hidden, eps=eps)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab=VOCAB, hidden=HIDDEN, n_layer=LAYERS, n_heads=4, n_kv_heads=2,
                 intermediate=172, eps=1e-6):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(
            [LlamaDecoderLayer(hidden, n_heads, n_kv_heads, intermediate, eps) for _ in range(n_layer)])
        self.norm = LlamaRMSNorm(hidden, eps=eps)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        init_weights(self)

    @staticmethod
    def _make_causal_mask(seq_len, dtype, device):
        # Older HF (e.g. LLaMA in transformers 4.28): -inf above the diagonal.
        mask = torch.full((seq_len, seq_len), float("-inf"), dtype=dtype, device=device)
        mask = torch.triu(mask, diagonal=1)
        return mask[None, None, :, :]  # [1, 1, S, S]

    def forward(self, input_ids):
        batch_size, seq_length = input_ids.shape
        hidden_states = self.embed_tokens(input_ids)
        attention_mask = self._make_causal_mask(seq_length, hidden_states.dtype, hidden_states.device)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        hidden_states = self.norm(hidden_states)
        logits = self.lm_head(hidden_states)
        return logits


# ----------------------------------------------------------------------------
# BERT (after transformers/models/bert/modeling_bert.py)
# ----------------------------------------------------------------------------

class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden, max_pos, type_vocab=2, eps=1e-12):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        position_ids = torch.arange(seq_length, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        # BertModel.forward without token_type_ids: all-zeros segment ids.
        token_type_ids = torch.zeros_like(input_ids)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, n_heads):
        super().__init__()
        self.num_attention_heads = n_heads
        self.attention_head_size = hidden // n_heads
        self.all_head_size = hidden
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))

        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)

        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return context_layer


class BertSelfOutput(nn.Module):
    def __init__(self, hidden, eps=1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertAttention(nn.Module):
    def __init__(self, hidden, n_heads):
        super().__init__()
        self.self = BertSelfAttention(hidden, n_heads)
        self.output = BertSelfOutput(hidden)

    def forward(self, hidden_states, attention_mask):
        self_outputs = self.self(hidden_states, attention_mask)
        return self.output(self_outputs, hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.dense = nn.Linear(hidden, intermediate)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))  # erf form


class BertOutput(nn.Module):
    def __init__(self, intermediate, hidden, eps=1e-12):
        super().__init__()
        self.dense = nn.Linear(intermediate, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertLayer(nn.Module):
    def __init__(self, hidden, n_heads, intermediate):
        super().__init__()
        self.attention = BertAttention(hidden, n_heads)
        self.intermediate = BertIntermediate(hidden, intermediate)
        self.output = BertOutput(intermediate, hidden)

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)
        intermediate_output = self.intermediate(attention_output)
        layer_output = self.output(intermediate_output, attention_output)
        return layer_output


class BertModel(nn.Module):
    def __init__(self, vocab=VOCAB, hidden=HIDDEN, n_layer=LAYERS, n_heads=4, intermediate=128,
                 max_pos=MAX_POS):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, max_pos)
        self.layer = nn.ModuleList([BertLayer(hidden, n_heads, intermediate) for _ in range(n_layer)])
        init_weights(self)

    def forward(self, input_ids, attention_mask):
        dtype = torch.float32
        # BertModel.get_extended_attention_mask
        extended_attention_mask = attention_mask[:, None, None, :]
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min

        hidden_states = self.embeddings(input_ids)
        for layer in self.layer:
            hidden_states = layer(hidden_states, extended_attention_mask)
        return hidden_states


# ----------------------------------------------------------------------------
# Export + verification
# ----------------------------------------------------------------------------

def export(name, model, sample_inputs, input_names, output_names, dynamic_axes=None):
    path = os.path.join(OUT_DIR, name + ".onnx")
    if dynamic_axes is None:
        dynamic_axes = {n: {0: "batch", 1: "seq"} for n in input_names + output_names}
    with torch.no_grad():
        torch.onnx.export(
            model,
            tuple(sample_inputs),
            path,
            export_params=True,
            opset_version=OPSET,
            do_constant_folding=True,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            keep_initializers_as_inputs=False,
        )
    return path


def op_histogram(model_proto):
    return collections.Counter(n.op_type for n in model_proto.graph.node)


def verify(name, path, model, check_inputs, input_names, output_names):
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    hist = op_histogram(proto)
    print("== %s: %s (%d bytes, %d nodes, %d initializers)" % (
        name, os.path.relpath(path), os.path.getsize(path), len(proto.graph.node),
        len(proto.graph.initializer)))
    print("   opset imports: %s" % ", ".join(
        "%s:%d" % (o.domain or "ai.onnx", o.version) for o in proto.opset_import))
    for vi in list(proto.graph.input) + list(proto.graph.output):
        t = vi.type.tensor_type
        dims = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in t.shape.dim]
        print("   %-6s %s %s %s" % ("input" if vi in proto.graph.input else "output", vi.name,
                                    onnx.TensorProto.DataType.Name(t.elem_type), dims))
    print("   op types:")
    for op in sorted(hist):
        print("     %-22s %d" % (op, hist[op]))

    try:
        import onnxruntime as ort  # noqa: F401
    except ImportError:
        print("   onnxruntime not importable: checked with onnx.checker (full_check) only")
        return
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        for inputs in check_inputs:
            refs = model(*inputs)
            refs = refs if isinstance(refs, tuple) else (refs,)
            gots = sess.run(output_names, {n: t.numpy() for n, t in zip(input_names, inputs)})
            err = max(float(np.max(np.abs(r.numpy() - g))) for r, g in zip(refs, gots))
            print("   onnxruntime shape %s max|diff| = %.3g" % (tuple(inputs[0].shape), err))
            if err > 1e-4:
                sys.exit("onnxruntime mismatch for %s" % name)


def main():
    # GPT-2's `attn_weights / math.sqrt(value.size(-1))` makes the tracer warn
    # that the head size is baked in as a constant; that is intended.
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    # Sample shapes for tracing: batch 2, seq 8 (distinct, so no dim gets
    # accidentally specialised by equality with another).
    builders = [
        ("gpt2", GPT2LMHeadModel, ["input_ids"], ["logits"]),
        ("llama", LlamaForCausalLM, ["input_ids"], ["logits"]),
        ("bert", BertModel, ["input_ids", "attention_mask"], ["last_hidden_state"]),
    ]
    for seed, (name, ctor, input_names, output_names) in enumerate(builders):
        torch.manual_seed(1234 + seed)
        model = ctor().eval()

        def make_inputs(b, s, gen_seed):
            g = torch.Generator().manual_seed(gen_seed)
            ids = torch.randint(0, VOCAB, (b, s), dtype=torch.int64, generator=g)
            if len(input_names) == 1:
                return [ids]
            mask = torch.ones((b, s), dtype=torch.int64)
            mask[0, s - 2:] = 0  # pad the tail of the first sequence
            return [ids, mask]

        path = export(name, model, make_inputs(2, 8, 99), input_names, output_names)
        verify(name, path, model, [make_inputs(2, 8, 7), make_inputs(3, 5, 8), make_inputs(1, 17, 9)],
               input_names, output_names)

    export_gpt2_past()


N_HEAD = 4
HEAD_DIM = HIDDEN // N_HEAD


def gpt2_past_names():
    past = []
    present = []
    for i in range(LAYERS):
        past += ["past.%d.key" % i, "past.%d.value" % i]
        present += ["present.%d.key" % i, "present.%d.value" % i]
    return ["input_ids"] + past, ["logits"] + present


def export_gpt2_past():
    """gpt2_past.onnx: gpt2.onnx's model and weights with HF's explicit cache
    inputs (past.{i}.key/value) and outputs (present.{i}.key/value)."""
    torch.manual_seed(1234)  # gpt2's seed: the same weights as gpt2.onnx
    model = GPT2LMHeadModelWithPast().eval()
    torch.manual_seed(1234)
    plain = GPT2LMHeadModel().eval()
    for (n, a), (_, b) in zip(model.state_dict().items(), plain.state_dict().items()):
        assert torch.equal(a, b), n

    input_names, output_names = gpt2_past_names()
    dynamic_axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for n in input_names[1:]:
        dynamic_axes[n] = {0: "batch", 2: "past"}
    for n in output_names[1:]:
        dynamic_axes[n] = {0: "batch", 2: "total"}

    def make_inputs(b, s, p, gen_seed):
        g = torch.Generator().manual_seed(gen_seed)
        ids = torch.randint(0, VOCAB, (b, s), dtype=torch.int64, generator=g)
        past = [torch.randn((b, N_HEAD, p, HEAD_DIM), generator=g) for _ in range(2 * LAYERS)]
        return [ids] + past

    # A non-zero past (3), distinct from batch and seq, so nothing specialises.
    path = export("gpt2_past", model, make_inputs(2, 8, 3, 99), input_names, output_names,
                  dynamic_axes)
    verify("gpt2_past", path, model,
           [make_inputs(2, 8, 3, 7), make_inputs(3, 5, 0, 8), make_inputs(1, 1, 16, 9)],
           input_names, output_names)
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("   onnxruntime not importable: gpt2_past not compared with gpt2 "
              "(run test/models/check_past.py with an interpreter that has it)")
        return
    import check_past
    if check_past.main() != 0:
        sys.exit("gpt2_past does not match gpt2")


if __name__ == "__main__":
    main()
