"""Qwen3 (dense) checkpoints written as Hugging Face lays them out, and an independent forward of such a folder.

The forward is written from Hugging Face's Qwen3 semantics (Qwen3ForCausalLM), not from the exporter's network:
it reads config.json and model.safetensors itself and recomputes the whole sequence with plain causal attention.
Per layer: RMSNorm -> q/k/v projections (no bias: attention_bias is false) -> q and k viewed as heads, each head
RMS-normalized by q_norm / k_norm (weights [head_dim], rms_norm_eps) -> RoPE (rotate-half, rope_theta) ->
grouped-query attention scaled by head_dim ** -0.5 -> o_proj + residual; RMSNorm -> SiLU(gate) * up -> down_proj
+ residual; then the final norm and the LM head (the embedding when tie_word_embeddings). In bfloat16 it keeps
Hugging Face's roundings: RMSNorm in float32 cast back before the weight, rotary tables cast to the activations'
dtype, the softmax in float32.
"""
import json
import os
import struct

import torch
import torch.nn.functional as F

# head_dim (32) differs from hidden_size / num_attention_heads (16), as in Qwen3-0.6B (1024 / 16 != 128).
QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "rope_scaling": None, "max_position_embeddings": 1024, "tie_word_embeddings": False,
    "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2, "bos_token_id": 1,
    "eos_token_id": 2, "torch_dtype": "float32", "use_cache": True,
}

_DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.uint8: "U8"}
# Read also what int8 checkpoints hold beside their float tensors, and MXFP4's packed blocks and scales (U8).
_NAME_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I8": torch.int8,
                "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8}


def checkpoint_tensors(hf_config, seed):
    """Random weights under Hugging Face's names and shapes. Scaled so that logits spread over several units
    (greedy choices far from ties); norm weights (q_norm and k_norm included) vary around 1."""
    generator = torch.Generator().manual_seed(seed)
    h, i, v = hf_config["hidden_size"], hf_config["intermediate_size"], hf_config["vocab_size"]
    d = hf_config["head_dim"]
    q, kv = hf_config["num_attention_heads"] * d, hf_config["num_key_value_heads"] * d

    def matrix(rows, columns, std=None):
        return torch.randn(rows, columns, generator=generator) * (std or columns ** -0.5)

    def norm(size):
        return 1.0 + 0.3 * torch.randn(size, generator=generator)

    tensors = {"model.embed_tokens.weight": matrix(v, h, 0.7), "model.norm.weight": norm(h)}
    if not hf_config["tie_word_embeddings"]:
        tensors["lm_head.weight"] = matrix(v, h, 0.7)
    for layer in range(hf_config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        tensors.update({
            p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
            p + "self_attn.q_proj.weight": matrix(q, h), p + "self_attn.k_proj.weight": matrix(kv, h),
            p + "self_attn.v_proj.weight": matrix(kv, h), p + "self_attn.o_proj.weight": matrix(h, q),
            p + "self_attn.q_norm.weight": norm(d), p + "self_attn.k_norm.weight": norm(d),
            p + "mlp.gate_proj.weight": matrix(i, h), p + "mlp.up_proj.weight": matrix(i, h),
            p + "mlp.down_proj.weight": matrix(h, i),
        })
    return tensors


def save_safetensors(path, tensors):
    """The safetensors layout: an 8-byte little-endian header length, a JSON header, the raw tensors."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        blob = tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": _DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        raw = bytearray(data[8 + length + start:8 + length + end])
        flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        tensors[name] = flat.view(_NAME_DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def write_checkpoint(folder, hf_config=QWEN3_CONFIG, seed=7, tokenizer_dir=None, dtype=torch.float32):
    """A Qwen3 checkpoint folder: config.json, generation_config.json, model.safetensors (a tied head left out,
    as Hugging Face saves it) and, from `tokenizer_dir`, tokenizer.json with its tokenizer_config.json."""
    os.makedirs(folder, exist_ok=True)
    config = dict(hf_config, torch_dtype={torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": [config["eos_token_id"]]}, f)
    tensors = {name: t.to(dtype) for name, t in checkpoint_tensors(config, seed).items()}
    save_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    if tokenizer_dir:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(tokenizer_dir, name)):
                with open(os.path.join(tokenizer_dir, name), "rb") as src, \
                        open(os.path.join(folder, name), "wb") as dst:
                    dst.write(src.read())
    else:
        with open(os.path.join(folder, "tokenizer.json"), "w") as f:
            f.write('{"version": "1.0"}')
    return folder


class Qwen3Reference:
    """The forward of a Qwen3 checkpoint folder in `dtype` (float32 or bfloat16), from Hugging Face's semantics.
    `tensors` replaces the folder's weights (e.g. dequantized int8 matrices)."""

    def __init__(self, folder, dtype=torch.float32, tensors=None):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        tensors = tensors if tensors is not None else load_safetensors(os.path.join(folder, "model.safetensors"))
        self.w = {name: t.to(dtype) for name, t in tensors.items()}
        if self.config.get("tie_word_embeddings"):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.dtype = dtype
        c = self.config
        self.head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = 1.0 / (c["rope_theta"] ** exponents)

    def rms_norm(self, x, weight):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return weight * (x.float() * torch.rsqrt(variance + self.config["rms_norm_eps"])).to(x.dtype)

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    def final_hidden(self, token_ids):
        """Every position's hidden state after the final norm, [len(token_ids), hidden_size]."""
        c, w, d = self.config, self.w, self.head_dim
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        n = len(token_ids)
        x = w["model.embed_tokens.weight"][torch.tensor(token_ids, dtype=torch.long)]
        freqs = torch.arange(n, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos().to(self.dtype)[:, None, :], angles.sin().to(self.dtype)[:, None, :]
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])
            q = self.rms_norm(self.linear(h, p + "self_attn.q_proj").view(n, heads, d),
                              w[p + "self_attn.q_norm.weight"])
            k = self.rms_norm(self.linear(h, p + "self_attn.k_proj").view(n, kv_heads, d),
                              w[p + "self_attn.k_norm.weight"])
            v = self.linear(h, p + "self_attn.v_proj").view(n, kv_heads, d)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, k) * d ** -0.5
            scores = scores.masked_fill(~causal, float("-inf"))
            probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
            attention = torch.einsum("hqk,khd->qhd", probabilities, v).reshape(n, heads * d)
            x = x + self.linear(attention, p + "self_attn.o_proj")
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            x = x + self.linear(F.silu(self.linear(h, p + "mlp.gate_proj")) * self.linear(h, p + "mlp.up_proj"),
                                p + "mlp.down_proj")
        return self.rms_norm(x, w["model.norm.weight"])

    def logits(self, token_ids):
        """float32 logits of every position."""
        with torch.no_grad():
            return self.linear(self.final_hidden(token_ids), "lm_head").float()

    def greedy(self, prompt, steps):
        """(the greedy continuation, the logits [steps, vocab] that chose each token)."""
        tokens, rows = list(prompt), []
        for _ in range(steps):
            row = self.logits(tokens)[-1]
            rows.append(row)
            tokens.append(int(torch.argmax(row)))
        return tokens[len(prompt):], torch.stack(rows)
