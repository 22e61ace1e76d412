"""SmolLM3 checkpoints written as Hugging Face lays them out, and an independent forward of such a folder.

The forward is written from Hugging Face's SmolLM3 semantics (SmolLM3ForCausalLM), not from the exporter's
network: it reads config.json and model.safetensors itself and recomputes the whole sequence with plain causal
attention. SmolLM3 is Llama's decoder with some layers left without rotary embedding: config.json's
no_rope_layers holds one flag per layer, 1 for a layer that rotates q and k, 0 for a NoPE layer; a config
without it makes every no_rope_layer_interval-th layer (default 4) a NoPE layer. Per layer: RMSNorm -> q/k/v
projections (no bias) -> RoPE (rotate-half, rope_theta; skipped on NoPE layers) -> grouped-query attention
scaled by head_dim ** -0.5 -> o_proj + residual; RMSNorm -> SiLU(gate) * up -> down_proj + residual; then the
final norm and the LM head (the embedding when tie_word_embeddings, SmolLM3's default). In bfloat16 it keeps
Hugging Face's roundings: RMSNorm in float32 cast back before the weight, rotary tables cast to the
activations' dtype, the softmax in float32.
"""
import json
import os

import torch
import torch.nn.functional as F

from qwen3_reference import load_safetensors, save_safetensors  # the file format only

# Layers 0 and 2 rotate, layer 1 does not (NoPE between two RoPE layers), as in SmolLM3-3B's [1, 1, 1, 0, ...].
SMOLLM3_CONFIG = {
    "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
    "rms_norm_eps": 1e-6, "rope_theta": 5000000.0, "rope_scaling": None, "max_position_embeddings": 1024,
    "tie_word_embeddings": True, "use_sliding_window": False, "sliding_window": None,
    "no_rope_layers": [1, 0, 1], "no_rope_layer_interval": 4, "layer_types": ["full_attention"] * 3,
    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "torch_dtype": "float32", "use_cache": True,
}


def rope_flags(config):
    """Hugging Face's per-layer use_rope flags (True: the layer rotates q and k)."""
    layers = config["num_hidden_layers"]
    flags = config.get("no_rope_layers")
    if flags is None:
        interval = config.get("no_rope_layer_interval", 4)
        flags = [int((index + 1) % interval != 0) for index in range(layers)]
    return [bool(flag) for flag in flags[:layers]]


def checkpoint_tensors(hf_config, seed):
    """Random weights under Hugging Face's names and shapes, logits spread over several units."""
    generator = torch.Generator().manual_seed(seed)
    h, i, v = hf_config["hidden_size"], hf_config["intermediate_size"], hf_config["vocab_size"]
    d = h // hf_config["num_attention_heads"]
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
            p + "mlp.gate_proj.weight": matrix(i, h), p + "mlp.up_proj.weight": matrix(i, h),
            p + "mlp.down_proj.weight": matrix(h, i),
        })
    return tensors


def write_checkpoint(folder, hf_config=SMOLLM3_CONFIG, seed=11, dtype=torch.float32):
    """A SmolLM3 checkpoint folder: config.json, generation_config.json, model.safetensors (a tied head left
    out, as Hugging Face saves it) and a placeholder tokenizer.json."""
    os.makedirs(folder, exist_ok=True)
    config = dict(hf_config, torch_dtype={torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": [config["eos_token_id"]]}, f)
    tensors = {name: t.to(dtype) for name, t in checkpoint_tensors(config, seed).items()}
    save_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    return folder


class SmolLM3Reference:
    """The forward of a SmolLM3 checkpoint folder in `dtype` (float32 or bfloat16), from Hugging Face's
    semantics. `tensors` replaces the folder's weights; `rope_everywhere` rotates every layer (what the model
    would compute if its NoPE layers were ignored, for the tests to show they matter)."""

    def __init__(self, folder, dtype=torch.float32, tensors=None, rope_everywhere=False):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        tensors = tensors if tensors is not None else load_safetensors(os.path.join(folder, "model.safetensors"))
        self.w = {name: t.to(dtype) for name, t in tensors.items()}
        if self.config.get("tie_word_embeddings", True):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.dtype = dtype
        c = self.config
        self.use_rope = [True] * c["num_hidden_layers"] if rope_everywhere else rope_flags(c)
        self.head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = 1.0 / (c.get("rope_theta", 2000000.0) ** exponents)

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
            q = self.linear(h, p + "self_attn.q_proj").view(n, heads, d)
            k = self.linear(h, p + "self_attn.k_proj").view(n, kv_heads, d)
            v = self.linear(h, p + "self_attn.v_proj").view(n, kv_heads, d)
            if self.use_rope[layer]:
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
