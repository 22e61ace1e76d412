"""Granite 3 checkpoints written as Hugging Face lays them out, and an independent forward of such a folder.

The forward is written from Hugging Face's Granite semantics (GraniteForCausalLM), not from the exporter's
network: it reads config.json and model.safetensors itself and recomputes the whole sequence with plain causal
attention. Granite is Llama's decoder with four multipliers: the token embeddings times embedding_multiplier;
per layer RMSNorm -> q/k/v projections (no bias) -> RoPE (rotate-half, rope_theta) -> grouped-query attention
with scores scaled by attention_multiplier -> o_proj, whose output is multiplied by residual_multiplier before the
residual add; RMSNorm -> SiLU(gate) * up -> down_proj, times residual_multiplier, + residual; then the final
norm, the LM head (the embedding when tie_word_embeddings) and the logits divided by logits_scaling. In bfloat16
it keeps Hugging Face's roundings: RMSNorm in float32 cast back before the weight, rotary tables cast to the
activations' dtype, the softmax in float32, each multiplier applied to bfloat16 values.
"""
import json
import os

import torch
import torch.nn.functional as F

from smollm3_reference import checkpoint_tensors  # random weights under Llama's names, nothing of the forward
from qwen3_reference import load_safetensors, save_safetensors  # the file format only

# Granite 3.x's multipliers are of this kind (granite-3.1-2b: 12.0, 0.22, 0.015625, 8.0); attention_multiplier
# differs from head_dim ** -0.5 = 0.25 here, so a package that ignored it would be far off.
GRANITE_CONFIG = {
    "architectures": ["GraniteForCausalLM"], "model_type": "granite", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
    "rms_norm_eps": 1e-5, "rope_theta": 10000000.0, "rope_scaling": None, "max_position_embeddings": 1024,
    "tie_word_embeddings": True, "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
    "attention_multiplier": 0.0078125, "logits_scaling": 8.0,
    "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0, "torch_dtype": "float32", "use_cache": True,
}


def write_checkpoint(folder, hf_config=GRANITE_CONFIG, seed=13, dtype=torch.float32):
    """A Granite checkpoint folder: config.json, generation_config.json, model.safetensors (a tied head left out,
    as Hugging Face saves it) and a placeholder tokenizer.json. The embedding's entries are small (std 1 /
    embedding_multiplier), as Granite's are: the multiplier brings them to the other activations' scale."""
    os.makedirs(folder, exist_ok=True)
    config = dict(hf_config, torch_dtype={torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"]}, f)
    tensors = checkpoint_tensors(config, seed)
    embedding = tensors["model.embed_tokens.weight"]
    tensors["model.embed_tokens.weight"] = embedding / (0.7 * config["embedding_multiplier"])
    tensors = {name: t.to(dtype) for name, t in tensors.items()}
    save_safetensors(os.path.join(folder, "model.safetensors"), tensors)
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    return folder


class GraniteReference:
    """The forward of a Granite checkpoint folder in `dtype` (float32 or bfloat16), from Hugging Face's
    semantics. `tensors` replaces the folder's weights; `multipliers` overrides config.json's (the tests show
    each matters)."""

    def __init__(self, folder, dtype=torch.float32, tensors=None, multipliers=None):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = dict(json.load(f), **(multipliers or {}))
        tensors = tensors if tensors is not None else load_safetensors(os.path.join(folder, "model.safetensors"))
        self.w = {name: t.to(dtype) for name, t in tensors.items()}
        if self.config.get("tie_word_embeddings", False):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.dtype = dtype
        c = self.config
        self.head_dim = c["hidden_size"] // c["num_attention_heads"]
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = self.llama3_scaled(1.0 / (c.get("rope_theta", 10000.0) ** exponents), c.get("rope_scaling"))

    @staticmethod
    def llama3_scaled(inv_freq, scaling):
        """Hugging Face's llama3 rope scaling (which Granite, a Llama, also reads): wavelengths shorter than
        original / high_freq_factor keep their frequency, those longer than original / low_freq_factor are
        divided by factor, and those between are interpolated by original / wavelength."""
        if not scaling or scaling.get("rope_type", scaling.get("type")) in (None, "default"):
            return inv_freq
        assert scaling.get("rope_type", scaling.get("type")) == "llama3", scaling
        factor, original = scaling["factor"], scaling["original_max_position_embeddings"]
        low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
        wavelength = 2 * torch.pi / inv_freq
        divided = torch.where(wavelength > original / low, inv_freq / factor, inv_freq)
        smooth = (original / wavelength - low) / (high - low)
        between = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        medium = (wavelength >= original / high) & (wavelength <= original / low)
        return torch.where(medium, between, divided)

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
        residual_multiplier = c.get("residual_multiplier", 1.0)
        n = len(token_ids)
        x = w["model.embed_tokens.weight"][torch.tensor(token_ids, dtype=torch.long)]
        x = x * c.get("embedding_multiplier", 1.0)
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
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, k) * c.get("attention_multiplier", 1.0)
            scores = scores.masked_fill(~causal, float("-inf"))
            probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
            attention = torch.einsum("hqk,khd->qhd", probabilities, v).reshape(n, heads * d)
            x = x + self.linear(attention, p + "self_attn.o_proj") * residual_multiplier
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            mlp = self.linear(F.silu(self.linear(h, p + "mlp.gate_proj")) * self.linear(h, p + "mlp.up_proj"),
                              p + "mlp.down_proj")
            x = x + mlp * residual_multiplier
        return self.rms_norm(x, w["model.norm.weight"])

    def logits(self, token_ids):
        """float32 logits of every position."""
        with torch.no_grad():
            logits = self.linear(self.final_hidden(token_ids), "lm_head")
            return (logits / self.config.get("logits_scaling", 1.0)).float()

    def greedy(self, prompt, steps):
        """(the greedy continuation, the logits [steps, vocab] that chose each token)."""
        tokens, rows = list(prompt), []
        for _ in range(steps):
            row = self.logits(tokens)[-1]
            rows.append(row)
            tokens.append(int(torch.argmax(row)))
        return tokens[len(prompt):], torch.stack(rows)
