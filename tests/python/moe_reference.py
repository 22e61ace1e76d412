"""Mixture-of-experts checkpoints (Qwen3-MoE, Mixtral) written as Hugging Face lays them out, and an independent
forward of such a folder.

The forward is written from Hugging Face's semantics (Qwen3MoeForCausalLM, MixtralForCausalLM), not from the
exporter's network: it reads config.json and model.safetensors itself and recomputes the whole sequence with plain
causal attention. Attention: RMSNorm -> q/k/v projections (no bias) -> Qwen3-MoE only: each head of q and k
RMS-normalized by q_norm / k_norm -> RoPE (rotate-half, rope_theta) -> grouped-query attention scaled by
head_dim ** -0.5 -> o_proj + residual. Then RMSNorm and, in a sparse layer, the router: logits = h @ gate^T in the
activations' dtype, a float32 softmax, torch.topk of num_experts_per_tok, divided by their sum when
norm_topk_prob (Qwen3-MoE's setting; always for Mixtral), cast back to the activations' dtype; each token's
output is the sum over its chosen experts of down(SiLU(gate(h)) * up(h)) times its weight. A Qwen3-MoE layer is
sparse unless mlp_only_layers names it, and only when (layer + 1) % decoder_sparse_step == 0; else a dense MLP
of intermediate_size. Mixtral's experts are block_sparse_moe.experts.e.w1 (gate), w3 (up), w2 (down).
"""
import json
import os

import torch
import torch.nn.functional as F

from qwen3_reference import load_safetensors, save_safetensors

# Qwen3-30B-A3B's layout scaled down: head_dim independent of hidden / heads, 8 experts of which 3 per token
# (norm_topk_prob as the real model), an expert width (48) that is not a multiple of the kernels' 32-column
# panels, and one dense layer (mlp_only_layers) of intermediate_size.
QWEN3_MOE_CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 96, "moe_intermediate_size": 48, "num_experts": 8, "num_experts_per_tok": 3,
    "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [1], "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "hidden_act": "silu",
    "attention_bias": False, "attention_dropout": 0.0, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "rope_scaling": None, "max_position_embeddings": 1024, "tie_word_embeddings": False,
    "use_sliding_window": False, "sliding_window": None, "max_window_layers": 3, "router_aux_loss_coef": 0.001,
    "output_router_logits": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
}

# Mixtral-8x7B's layout scaled down: top-2 of 8 experts in every layer, Mistral attention.
MIXTRAL_CONFIG = {
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 80, "num_local_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu", "rms_norm_eps": 1e-5,
    "rope_theta": 1000000.0, "max_position_embeddings": 1024, "sliding_window": None, "tie_word_embeddings": False,
    "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0, "output_router_logits": False, "bos_token_id": 1,
    "eos_token_id": 2, "torch_dtype": "float32",
}


def is_sparse(config, layer):
    if config["model_type"] == "mixtral":
        return True
    step = config.get("decoder_sparse_step", 1)
    return layer not in (config.get("mlp_only_layers") or []) and (layer + 1) % step == 0


def expert_count(config):
    return config["num_local_experts"] if config["model_type"] == "mixtral" else config["num_experts"]


def expert_width(config):
    return config["intermediate_size"] if config["model_type"] == "mixtral" else config["moe_intermediate_size"]


def expert_names(config, layer, expert):
    """(gate, up, down) weight names of one expert, as the family's checkpoints spell them."""
    if config["model_type"] == "mixtral":
        p = f"model.layers.{layer}.block_sparse_moe.experts.{expert}."
        return p + "w1.weight", p + "w3.weight", p + "w2.weight"
    p = f"model.layers.{layer}.mlp.experts.{expert}."
    return p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"


def router_name(config, layer):
    block = "block_sparse_moe" if config["model_type"] == "mixtral" else "mlp"
    return f"model.layers.{layer}.{block}.gate.weight"


def head_dim_of(config):
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def checkpoint_tensors(config, seed):
    """Random weights under Hugging Face's names and shapes. Matrices scaled so logits spread over several units;
    the router's rows wide apart (std 3 / sqrt(hidden)), so that the chosen experts are far from ties."""
    generator = torch.Generator().manual_seed(seed)
    h, v, d = config["hidden_size"], config["vocab_size"], head_dim_of(config)
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d

    def matrix(rows, columns, std=None):
        return torch.randn(rows, columns, generator=generator) * (std or columns ** -0.5)

    def norm(size):
        return 1.0 + 0.3 * torch.randn(size, generator=generator)

    tensors = {"model.embed_tokens.weight": matrix(v, h, 0.7), "model.norm.weight": norm(h)}
    if not config["tie_word_embeddings"]:
        tensors["lm_head.weight"] = matrix(v, h, 0.7)
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        tensors.update({
            p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
            p + "self_attn.q_proj.weight": matrix(q, h), p + "self_attn.k_proj.weight": matrix(kv, h),
            p + "self_attn.v_proj.weight": matrix(kv, h), p + "self_attn.o_proj.weight": matrix(h, q),
        })
        if config["model_type"] == "qwen3_moe":
            tensors.update({p + "self_attn.q_norm.weight": norm(d), p + "self_attn.k_norm.weight": norm(d)})
        if is_sparse(config, layer):
            m = expert_width(config)
            tensors[router_name(config, layer)] = matrix(expert_count(config), h, 3.0 * h ** -0.5)
            for expert in range(expert_count(config)):
                gate, up, down = expert_names(config, layer, expert)
                tensors.update({gate: matrix(m, h), up: matrix(m, h), down: matrix(h, m)})
        else:
            i = config["intermediate_size"]
            tensors.update({p + "mlp.gate_proj.weight": matrix(i, h), p + "mlp.up_proj.weight": matrix(i, h),
                            p + "mlp.down_proj.weight": matrix(h, i)})
    return tensors


def write_checkpoint(folder, config=QWEN3_MOE_CONFIG, seed=7, dtype=torch.float32, tensors=None):
    """A checkpoint folder: config.json, generation_config.json, model.safetensors, a placeholder tokenizer.json.
    `tensors` replaces the random weights."""
    os.makedirs(folder, exist_ok=True)
    config = dict(config, torch_dtype={torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": [config["eos_token_id"]]}, f)
    tensors = tensors if tensors is not None else checkpoint_tensors(config, seed)
    save_safetensors(os.path.join(folder, "model.safetensors"), {n: t.to(dtype) for n, t in tensors.items()})
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    return folder


class MoeReference:
    """The forward of a Qwen3-MoE or Mixtral checkpoint folder in `dtype`, from Hugging Face's semantics.
    `expert_choices` records, per sparse layer, every token's chosen experts of the last forward."""

    def __init__(self, folder, dtype=torch.float32):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        self.w = {name: t.to(dtype) for name, t in load_safetensors(os.path.join(folder, "model.safetensors")).items()}
        if self.config.get("tie_word_embeddings"):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.dtype = dtype
        self.head_dim = head_dim_of(self.config)
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        self.inv_freq = 1.0 / (self.config["rope_theta"] ** exponents)
        self.expert_choices = {}

    def rms_norm(self, x, weight):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return weight * (x.float() * torch.rsqrt(variance + self.config["rms_norm_eps"])).to(x.dtype)

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def swiglu(self, x, gate, up, down):
        return F.linear(F.silu(F.linear(x, self.w[gate])) * F.linear(x, self.w[up]), self.w[down])

    def sparse_block(self, x, layer):
        c = self.config
        probabilities = F.softmax(F.linear(x, self.w[router_name(c, layer)]), dim=1, dtype=torch.float)
        weights, chosen = torch.topk(probabilities, c["num_experts_per_tok"], dim=-1)
        if c["model_type"] == "mixtral" or c.get("norm_topk_prob", False):
            weights = weights / weights.sum(dim=-1, keepdim=True)
        weights = weights.to(x.dtype)
        self.expert_choices[layer] = chosen
        out = torch.zeros_like(x)
        for expert in range(expert_count(c)):
            tokens, slot = torch.where(chosen == expert)
            if tokens.numel() == 0:
                continue
            y = self.swiglu(x[tokens], *expert_names(c, layer, expert)) * weights[tokens, slot, None]
            out.index_add_(0, tokens, y.to(x.dtype))
        return out

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
            q = F.linear(h, w[p + "self_attn.q_proj.weight"]).view(n, heads, d)
            k = F.linear(h, w[p + "self_attn.k_proj.weight"]).view(n, kv_heads, d)
            v = F.linear(h, w[p + "self_attn.v_proj.weight"]).view(n, kv_heads, d)
            if c["model_type"] == "qwen3_moe":
                q = self.rms_norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.rms_norm(k, w[p + "self_attn.k_norm.weight"])
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q, k) * d ** -0.5
            scores = scores.masked_fill(~causal, float("-inf"))
            probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
            attention = torch.einsum("hqk,khd->qhd", probabilities, v).reshape(n, heads * d)
            x = x + F.linear(attention, w[p + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            if is_sparse(c, layer):
                x = x + self.sparse_block(h, layer)
            else:
                x = x + self.swiglu(h, p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight")
        return self.rms_norm(x, w["model.norm.weight"])

    def logits(self, token_ids):
        """float32 logits of every position."""
        with torch.no_grad():
            return F.linear(self.final_hidden(token_ids), self.w["lm_head.weight"]).float()

    def greedy(self, prompt, steps):
        """(the greedy continuation, the logits [steps, vocab] that chose each token)."""
        tokens, rows = list(prompt), []
        for _ in range(steps):
            row = self.logits(tokens)[-1]
            rows.append(row)
            tokens.append(int(torch.argmax(row)))
        return tokens[len(prompt):], torch.stack(rows)
