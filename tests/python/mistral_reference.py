"""Mistral checkpoints with a sliding window, written as Hugging Face lays them out, and an independent forward of
such a folder.

The forward is written from Hugging Face's Mistral semantics (MistralForCausalLM with sliding_window set), not
from the exporter's network: it reads config.json and model.safetensors itself and recomputes the whole sequence.
Per layer: RMSNorm -> q/k/v projections (no bias) -> RoPE (rotate-half, rope_theta) -> grouped-query attention
scaled by head_dim ** -0.5 under Hugging Face's sliding-window causal mask (masking_utils: the query at position
q sees key position k when k <= q and k > q - sliding_window, i.e. the last sliding_window positions, itself
included) -> o_proj + residual; RMSNorm -> SiLU(gate) * up -> down_proj + residual; then the final norm and the
untied LM head.
"""
import json
import os

import torch
import torch.nn.functional as F

from qwen3_reference import load_safetensors, save_safetensors

# A window of 24 positions over blocks of 16: a window that ends inside a block and spans two; prompts of the
# tests run past it, and max_position_embeddings (256) is what the package serves, not the window.
MISTRAL_CONFIG = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "max_position_embeddings": 256, "sliding_window": 24, "tie_word_embeddings": False, "bos_token_id": 1,
    "eos_token_id": 2, "torch_dtype": "float32", "attention_dropout": 0.0, "use_cache": True,
}


def checkpoint_tensors(hf_config, seed):
    """Random weights under Hugging Face's names and shapes, scaled so that logits spread over several units."""
    generator = torch.Generator().manual_seed(seed)
    h, i, v = hf_config["hidden_size"], hf_config["intermediate_size"], hf_config["vocab_size"]
    d = hf_config["head_dim"]
    q, kv = hf_config["num_attention_heads"] * d, hf_config["num_key_value_heads"] * d

    def matrix(rows, columns, std=None):
        return torch.randn(rows, columns, generator=generator) * (std or columns ** -0.5)

    def norm(size):
        return 1.0 + 0.3 * torch.randn(size, generator=generator)

    tensors = {"model.embed_tokens.weight": matrix(v, h, 0.7), "model.norm.weight": norm(h),
               "lm_head.weight": matrix(v, h, 0.7)}
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


def write_checkpoint(folder, hf_config=MISTRAL_CONFIG, seed=11):
    """A Mistral checkpoint folder: config.json, generation_config.json, model.safetensors, a stub tokenizer."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": hf_config["bos_token_id"], "eos_token_id": hf_config["eos_token_id"]}, f)
    save_safetensors(os.path.join(folder, "model.safetensors"), checkpoint_tensors(hf_config, seed))
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    return folder


class MistralReference:
    """The float32 forward of a Mistral checkpoint folder, from Hugging Face's semantics."""

    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        self.w = {name: t.float() for name, t in load_safetensors(os.path.join(folder, "model.safetensors")).items()}
        c = self.config
        self.head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = 1.0 / (c["rope_theta"] ** exponents)

    def rms_norm(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.config["rms_norm_eps"]))

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"])

    def mask(self, n):
        """[n, n] True where query q may see key k: causal, and within the sliding window when there is one."""
        query = torch.arange(n)[:, None]
        key = torch.arange(n)[None, :]
        allowed = key <= query
        window = self.config.get("sliding_window")
        if window:
            allowed &= key > query - window
        return allowed

    def logits(self, token_ids):
        """float32 logits of every position."""
        c, w, d = self.config, self.w, self.head_dim
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        n = len(token_ids)
        with torch.no_grad():
            x = w["model.embed_tokens.weight"][torch.tensor(token_ids, dtype=torch.long)]
            freqs = torch.arange(n, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
            angles = torch.cat((freqs, freqs), dim=-1)
            cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
            allowed = self.mask(n)
            for layer in range(c["num_hidden_layers"]):
                p = f"model.layers.{layer}."
                h = self.rms_norm(x, w[p + "input_layernorm.weight"])
                q = self.linear(h, p + "self_attn.q_proj").view(n, heads, d)
                k = self.linear(h, p + "self_attn.k_proj").view(n, kv_heads, d)
                v = self.linear(h, p + "self_attn.v_proj").view(n, kv_heads, d)
                q = q * cos + self.rotate_half(q) * sin
                k = k * cos + self.rotate_half(k) * sin
                k = k.repeat_interleave(heads // kv_heads, dim=1)
                v = v.repeat_interleave(heads // kv_heads, dim=1)
                scores = torch.einsum("qhd,khd->hqk", q, k) * d ** -0.5
                probabilities = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
                attention = torch.einsum("hqk,khd->qhd", probabilities, v).reshape(n, heads * d)
                x = x + self.linear(attention, p + "self_attn.o_proj")
                h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
                x = x + self.linear(F.silu(self.linear(h, p + "mlp.gate_proj")) * self.linear(h, p + "mlp.up_proj"),
                                    p + "mlp.down_proj")
            return self.linear(self.rms_norm(x, w["model.norm.weight"]), "lm_head")

    def greedy(self, prompt, steps):
        """(the greedy continuation, the logits [steps, vocab] that chose each token)."""
        tokens, rows = list(prompt), []
        for _ in range(steps):
            row = self.logits(tokens)[-1]
            rows.append(row)
            tokens.append(int(torch.argmax(row)))
        return tokens[len(prompt):], torch.stack(rows)
