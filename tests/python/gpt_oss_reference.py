"""GPT-OSS checkpoints (GptOssForCausalLM) written as Hugging Face lays them out, dense or with MXFP4 experts, and an
independent forward of such a folder.

The forward is written from Hugging Face's GPT-OSS semantics, not from the exporter's network: it reads config.json
and model.safetensors itself and recomputes the whole sequence. Per layer: RMSNorm (float32, times the weight, cast
back) -> q/k/v projections with biases -> RoPE with YaRN's inverse frequencies, cos and sin multiplied by YaRN's
attention factor, rotate-half on the two halves of each head -> grouped-query attention scaled by head_dim ** -0.5,
causal, within a sliding window of `sliding_window` keys on the layers layer_types marks "sliding_attention" (key j
seen by query i when i - window < j <= i), with a learned per-head sink logit appended to each query's scores before
the softmax and dropped after (the probabilities of the keys sum to less than 1) -> o_proj with bias + residual.
Then RMSNorm and the router: logits = h @ W^T + b, torch.topk of num_experts_per_tok on the logits, a softmax over
those k logits. Each chosen expert: gate_up = h @ gate_up_proj[e] + bias, gate = its even columns, up = its odd
columns, gate clamped above at swiglu_limit, up clamped to [-limit, limit], glu = gate * sigmoid(1.702 * gate),
out = ((up + 1) * glu) @ down_proj[e] + bias; the outputs weighted and summed + residual. Final norm, lm_head.
In bfloat16 it keeps Hugging Face's roundings: norm weights kept in float32 (_keep_in_fp32_modules), the rotary
tables cast to the activations' dtype after the attention factor, the attention softmax in the activations' dtype
(eager attention), every expert's output rounded before its weight and the weighted outputs summed once.

MXFP4 (OCP Microscaling, as openai/gpt-oss-20b stores its experts): `<proj>_blocks` uint8 [E, rows, K / 32, 16]
and `<proj>_scales` uint8 [E, rows, K / 32]. Each byte holds two E2M1 codes of consecutive k, the LOW nibble the
first (even k); each group of 32 k shares one E8M0 scale 2 ** (s - 127). The rows are the projection's OUTPUTS:
2 * intermediate_size for gate_up_proj (still interleaved gate, up, gate, ...), hidden_size for down_proj, so the
blocks are the transpose of the dequantized [E, K, rows] tensor the forward multiplies by (x @ W). The biases are
stored as plain tensors beside them.
"""
import json
import math
import os

import torch
import torch.nn.functional as F

from qwen3_reference import load_safetensors, save_safetensors

# gpt-oss-20b's layout scaled down: head_dim independent of hidden / heads, 8 experts of which 2 per token, the
# alternating sliding / full layers, attention biases and sinks, YaRN (factor 32, truncate false) over a small
# original context. hidden_size and intermediate_size are multiples of MXFP4's 32-value groups.
GPT_OSS_CONFIG = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 320, "hidden_size": 64,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention"], "attention_bias": True, "attention_dropout": 0.0,
    "rms_norm_eps": 1e-5, "rope_theta": 150000.0,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                     "original_max_position_embeddings": 64},
    "max_position_embeddings": 2048, "swiglu_limit": 7.0, "tie_word_embeddings": False, "hidden_act": "silu",
    "initializer_range": 0.02, "router_aux_loss_coef": 0.9, "output_router_logits": False, "use_cache": True,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
}

# openai/gpt-oss-20b's quantization_config: every expert matrix MXFP4, these modules left in the checkpoint's dtype.
MXFP4_QUANTIZATION_CONFIG = {
    "quant_method": "mxfp4",
    "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                               "lm_head"],
}

MXFP4_GROUP = 32        # values per E8M0 scale
MXFP4_SCALE_BIAS = 127  # E8M0: 2 ** (s - 127); 255 is NaN
SWIGLU_ALPHA = 1.702    # GptOssExperts.alpha


def e2m1_value(code):
    """One E2M1 code (4 bits) by the OCP Microscaling definition: sign in bit 3, a 2-bit exponent (bias 1) in bits
    2-1, a 1-bit mantissa in bit 0; exponent 0 is subnormal (0 or 0.5)."""
    sign = -1.0 if code & 0b1000 else 1.0
    exponent, mantissa = (code >> 1) & 0b11, code & 1
    magnitude = mantissa * 0.5 if exponent == 0 else 2.0 ** (exponent - 1) * (1.0 + mantissa / 2)
    return sign * magnitude


# float32 is exact for every E2M1 value and every 2 ** (s - 127) up to s = 254 (2 ** -127 is a float32 subnormal).
_E2M1 = torch.tensor([e2m1_value(code) for code in range(16)], dtype=torch.float32)
_E8M0 = torch.tensor([2.0 ** (s - MXFP4_SCALE_BIAS) if s < 255 else float("nan") for s in range(256)],
                     dtype=torch.float64).float()


def mxfp4_dequantize(blocks, scales):
    """float32 [E, K, rows] from blocks uint8 [E, rows, K / 32, 16] and scales uint8 [E, rows, K / 32]: k = 32 g + 2 b
    is the low nibble of blocks[e, r, g, b], k + 1 its high nibble, both times 2 ** (scales[e, r, g] - 127)."""
    experts, rows, groups, width = blocks.shape
    assert width == MXFP4_GROUP // 2 and tuple(scales.shape) == (experts, rows, groups), (blocks.shape, scales.shape)
    assert blocks.dtype == torch.uint8 and scales.dtype == torch.uint8
    codes = torch.stack((blocks & 0x0F, blocks >> 4), dim=-1).long()     # [E, rows, G, 16, 2]: low nibble first
    values = _E2M1[codes].reshape(experts, rows, groups, MXFP4_GROUP)
    values = values * _E8M0[scales.long()][..., None]
    return values.reshape(experts, rows, groups * MXFP4_GROUP).transpose(1, 2).contiguous()


def mxfp4_pack(codes, exponents):
    """Blocks and scales from E2M1 codes int [E, rows, K] (0..15) and E8M0 exponents int [E, rows, K / 32]."""
    experts, rows, k = codes.shape
    codes = codes.reshape(experts, rows, k // MXFP4_GROUP, MXFP4_GROUP // 2, 2).to(torch.uint8)
    return codes[..., 0] | (codes[..., 1] << 4), exponents.to(torch.uint8)


def check_mxfp4_against_definition():
    """Decodes a few hand-built bytes and checks them against the values the definition gives."""
    table = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    assert [e2m1_value(code) for code in range(16)] == table
    assert math.copysign(1.0, e2m1_value(8)) == -1.0  # 0b1000 is -0
    # One expert, two output rows, K = 64 (two groups of 32).
    blocks = torch.zeros(1, 2, 2, 16, dtype=torch.uint8)
    scales = torch.tensor([[[127, 128], [125, 127]]], dtype=torch.uint8)  # x1, x2 / x0.25, x1
    blocks[0, 0, 0, 0] = 0x21   # k 0: code 1 (0.5), k 1: code 2 (1.0)
    blocks[0, 0, 0, 1] = 0xF7   # k 2: code 7 (6.0), k 3: code 15 (-6.0)
    blocks[0, 0, 1, 15] = 0x9B  # k 62: code 11 (-1.5), k 63: code 9 (-0.5); group 1's scale 2
    blocks[0, 1, 0, 3] = 0x5C   # row 1, k 6: code 12 (-2.0), k 7: code 5 (3.0); scale 2 ** -2
    blocks[0, 1, 1, 0] = 0x83   # row 1, k 32: code 3 (1.5), k 33: code 8 (-0.0); scale 1
    out = mxfp4_dequantize(blocks, scales)
    assert out.shape == (1, 64, 2) and out.dtype == torch.float32
    expected = torch.zeros(64, 2)
    expected[0, 0], expected[1, 0], expected[2, 0], expected[3, 0] = 0.5, 1.0, 6.0, -6.0
    expected[62, 0], expected[63, 0] = -3.0, -1.0
    expected[6, 1], expected[7, 1] = -0.5, 0.75
    expected[32, 1] = 1.5
    assert torch.equal(out[0], expected), out[0]
    assert math.copysign(1.0, float(out[0, 33, 1])) == -1.0
    # Extreme scales: 2 ** -127 (subnormal) and 2 ** 127 are exact, 255 is NaN.
    edge = mxfp4_dequantize(torch.full((1, 3, 1, 16), 0x22, dtype=torch.uint8),
                            torch.tensor([[[0], [254], [255]]], dtype=torch.uint8))
    assert float(edge[0, 0, 0]) == 2.0 ** -127 and float(edge[0, 0, 1]) == 2.0 ** 127
    assert torch.isnan(edge[0, :, 2]).all()
    # mxfp4_pack inverts the layout.
    codes = torch.arange(64).remainder(16).reshape(1, 1, 64).expand(1, 2, 64)
    packed, exps = mxfp4_pack(codes, torch.tensor([[[127, 126]] * 2]))
    assert packed[0, 0, 0, 0] == 0x10 and packed[0, 0, 0, 7] == 0xFE and exps.tolist() == [[[127, 126]] * 2]
    decoded = mxfp4_dequantize(packed, exps)[0, :, 1]
    assert torch.equal(decoded, torch.tensor([table[k % 16] * (1.0 if k < 32 else 0.5) for k in range(64)]))
    return True


def yarn_inv_freq(config):
    """(inverse frequencies [head_dim / 2], attention factor) of Hugging Face's _compute_yarn_parameters: the
    correction range low, high = dim * ln(original / (2 pi beta)) / (2 ln theta) for beta_fast, beta_slow, floored /
    ceiled only when truncate (default true), clamped to [0, dim - 1]; ramp_i = clamp((i - low) / (high - low), 0, 1);
    inv_freq_i = ramp_i / (factor theta^(2i/dim)) + (1 - ramp_i) / theta^(2i/dim); attention factor (unless given)
    0.1 ln(factor) + 1 (or the mscale / mscale_all_dim ratio when both are given)."""
    c, scaling = config, _rope_parameters(config)
    theta = scaling.get("rope_theta", c.get("rope_theta"))
    dim = int((c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]) * c.get("partial_rotary_factor", 1.0))
    factor = scaling["factor"]
    original = scaling.get("original_max_position_embeddings") or c["max_position_embeddings"]

    def mscale_of(scale, mscale=1.0):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = float(mscale_of(factor, mscale) / mscale_of(factor, mscale_all_dim))
        else:
            attention_factor = mscale_of(factor)
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = theta ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    return inv_freq, attention_factor


def _rope_parameters(config):
    """rope_scaling as config.json spells it (gpt-oss-20b's), or newer transformers' rope_parameters."""
    return config.get("rope_scaling") or config.get("rope_parameters") or {}


def rope_inv_freq(config):
    """(inverse frequencies, attention factor) for rope_scaling None / default or yarn."""
    scaling = _rope_parameters(config)
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "yarn":
        return yarn_inv_freq(config)
    assert kind == "default", f"rope_type {kind} is not modelled here"
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    theta = scaling.get("rope_theta", config.get("rope_theta"))
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), 1.0


def expert_prefix(layer):
    return f"model.layers.{layer}.mlp.experts."


def checkpoint_tensors(config, seed, mxfp4=False):
    """Random weights under Hugging Face's names and shapes. The experts are drawn as MXFP4 (random E2M1 codes, E8M0
    exponents 120..124) whatever `mxfp4`, so a seed gives the same model both ways: with mxfp4 they are stored as
    `_blocks` / `_scales`, without it dequantized as gate_up_proj [E, H, 2I] and down_proj [E, I, H]. Matrices
    scaled so logits spread over several units; the router's rows wide apart (std 3 / sqrt(hidden)) so the chosen
    experts are far from ties; sinks ~ N(0, 1)."""
    generator = torch.Generator().manual_seed(seed)
    h, v, i = config["hidden_size"], config["vocab_size"], config["intermediate_size"]
    d, heads, kv_heads = config["head_dim"], config["num_attention_heads"], config["num_key_value_heads"]
    experts = config["num_local_experts"]
    assert h % MXFP4_GROUP == 0 and i % MXFP4_GROUP == 0, "MXFP4 needs hidden and intermediate sizes of 32s"

    def matrix(rows, columns, std=None):
        return torch.randn(rows, columns, generator=generator) * (std or columns ** -0.5)

    def vector(size, std):
        return torch.randn(size, generator=generator) * std

    def norm(size):
        return 1.0 + 0.3 * torch.randn(size, generator=generator)

    def mxfp4_matrix(rows, k):
        codes = torch.randint(0, 16, (experts, rows, k), generator=generator)
        exponents = torch.randint(120, 125, (experts, rows, k // MXFP4_GROUP), generator=generator)
        return mxfp4_pack(codes, exponents)

    tensors = {"model.embed_tokens.weight": matrix(v, h, 0.7), "model.norm.weight": norm(h)}
    if not config["tie_word_embeddings"]:
        tensors["lm_head.weight"] = matrix(v, h, 0.5)
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        tensors.update({
            p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": norm(h),
            p + "self_attn.q_proj.weight": matrix(heads * d, h), p + "self_attn.q_proj.bias": vector(heads * d, 0.1),
            p + "self_attn.k_proj.weight": matrix(kv_heads * d, h),
            p + "self_attn.k_proj.bias": vector(kv_heads * d, 0.1),
            p + "self_attn.v_proj.weight": matrix(kv_heads * d, h),
            p + "self_attn.v_proj.bias": vector(kv_heads * d, 0.1),
            p + "self_attn.o_proj.weight": matrix(h, heads * d), p + "self_attn.o_proj.bias": vector(h, 0.1),
            p + "self_attn.sinks": vector(heads, 1.0),
            p + "mlp.router.weight": matrix(experts, h, 3.0 * h ** -0.5), p + "mlp.router.bias": vector(experts, 0.5),
        })
        e = expert_prefix(layer)
        gate_up_blocks, gate_up_scales = mxfp4_matrix(2 * i, h)   # rows: the 2I outputs, K = hidden
        down_blocks, down_scales = mxfp4_matrix(h, i)              # rows: the H outputs, K = intermediate
        tensors[e + "gate_up_proj_bias"] = torch.randn(experts, 2 * i, generator=generator) * 0.1
        tensors[e + "down_proj_bias"] = torch.randn(experts, h, generator=generator) * 0.1
        if mxfp4:
            tensors.update({e + "gate_up_proj_blocks": gate_up_blocks, e + "gate_up_proj_scales": gate_up_scales,
                            e + "down_proj_blocks": down_blocks, e + "down_proj_scales": down_scales})
        else:
            tensors[e + "gate_up_proj"] = mxfp4_dequantize(gate_up_blocks, gate_up_scales)  # [E, H, 2I]
            tensors[e + "down_proj"] = mxfp4_dequantize(down_blocks, down_scales)            # [E, I, H]
    return tensors


def write_checkpoint(folder, config=GPT_OSS_CONFIG, seed=7, dtype=torch.float32, tensors=None, mxfp4=False):
    """A checkpoint folder: config.json (with openai's quantization_config when the experts are MXFP4),
    generation_config.json, model.safetensors (float tensors in `dtype`, MXFP4 blocks and scales uint8), a
    placeholder tokenizer.json. `tensors` replaces the random weights (MXFP4 when any name ends in _blocks)."""
    os.makedirs(folder, exist_ok=True)
    if tensors is None:
        tensors = checkpoint_tensors(config, seed, mxfp4)
    mxfp4 = mxfp4 or any(name.endswith("_blocks") for name in tensors)
    config = {key: value for key, value in config.items() if key != "quantization_config"}
    config["torch_dtype"] = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
    if mxfp4:
        config["quantization_config"] = json.loads(json.dumps(MXFP4_QUANTIZATION_CONFIG))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config["bos_token_id"], "eos_token_id": [config["eos_token_id"]]}, f)
    save_safetensors(os.path.join(folder, "model.safetensors"),
                     {n: t if t.dtype == torch.uint8 else t.to(dtype) for n, t in tensors.items()})
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    return folder


def _is_norm(name):
    return name.endswith("layernorm.weight") or name == "model.norm.weight"


class GptOssReference:
    """The forward of a GPT-OSS checkpoint folder (dense or MXFP4 experts) in `dtype`, from Hugging Face's semantics.
    `expert_choices` records, per layer, every token's chosen experts [tokens, k] of the last forward (in topk's
    order: largest router logit first)."""

    def __init__(self, folder, dtype=torch.float32):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        c = self.config
        raw = load_safetensors(os.path.join(folder, "model.safetensors"))
        for layer in range(c["num_hidden_layers"]):
            e = expert_prefix(layer)
            for proj in ("gate_up_proj", "down_proj"):
                if e + proj + "_blocks" in raw:
                    raw[e + proj] = mxfp4_dequantize(raw.pop(e + proj + "_blocks"), raw.pop(e + proj + "_scales"))
        # The norms stay float32 whatever the dtype (GptOssPreTrainedModel._keep_in_fp32_modules).
        self.w = {name: t.float() if _is_norm(name) else t.to(dtype) for name, t in raw.items()}
        if c.get("tie_word_embeddings"):
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.dtype = dtype
        self.head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        self.inv_freq, self.attention_scaling = rope_inv_freq(c)
        self.limit = c.get("swiglu_limit", 7.0)
        self.expert_choices = {}

    def rms_norm(self, x, weight):
        """GptOssRMSNorm: normalized in float32, times the (float32) weight, then cast back."""
        xf = x.float()
        normalized = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.config["rms_norm_eps"])
        return (weight * normalized).to(x.dtype)

    def linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    @staticmethod
    def rotate(x, cos, sin):
        first, second = torch.chunk(x, 2, dim=-1)
        return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)

    def attention(self, h, layer, cos, sin):
        c, w, d = self.config, self.w, self.head_dim
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        p = f"model.layers.{layer}.self_attn."
        n = h.shape[0]
        q = self.rotate(self.linear(h, p + "q_proj").view(n, heads, d), cos, sin)
        k = self.rotate(self.linear(h, p + "k_proj").view(n, kv_heads, d), cos, sin)
        v = self.linear(h, p + "v_proj").view(n, kv_heads, d)
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * d ** -0.5
        query, key = torch.arange(n)[:, None], torch.arange(n)[None, :]
        allowed = key <= query
        if (c.get("layer_types") or [])[layer:layer + 1] == ["sliding_attention"] and c.get("sliding_window"):
            allowed = allowed & (key > query - c["sliding_window"])
        scores = scores.masked_fill(~allowed, float("-inf"))
        sinks = w[p + "sinks"].view(heads, 1, 1).expand(heads, n, 1)
        combined = torch.cat((scores, sinks), dim=-1)
        combined = combined - combined.max(dim=-1, keepdim=True).values
        probabilities = F.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1]  # the sink's share dropped
        attention = torch.einsum("hqk,khd->qhd", probabilities, v).reshape(n, heads * d)
        return self.linear(attention, p + "o_proj")

    def experts(self, h, layer):
        c, w = self.config, self.w
        router_logits = self.linear(h, f"model.layers.{layer}.mlp.router")
        top, chosen = torch.topk(router_logits, c["num_experts_per_tok"], dim=-1)
        weights = F.softmax(top, dim=1, dtype=top.dtype)
        self.expert_choices[layer] = chosen
        e = expert_prefix(layer)
        out = torch.zeros(h.shape, dtype=torch.float32)
        for expert in range(c["num_local_experts"]):
            tokens, slot = torch.where(chosen == expert)
            if tokens.numel() == 0:
                continue
            # Every token through the expert, as Hugging Face's inference path does (its bmm over all tokens):
            # a bfloat16 GEMM's rounding can depend on the number of rows. Then the chosen tokens' rows.
            gate_up = h @ w[e + "gate_up_proj"][expert] + w[e + "gate_up_proj_bias"][expert]
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
            gate = gate.clamp(max=self.limit)
            up = up.clamp(min=-self.limit, max=self.limit)
            glu = gate * torch.sigmoid(gate * SWIGLU_ALPHA)
            y = ((up + 1) * glu) @ w[e + "down_proj"][expert] + w[e + "down_proj_bias"][expert]
            out.index_add_(0, tokens, (y[tokens] * weights[tokens, slot, None]).float())
        return out.to(h.dtype)

    def final_hidden(self, token_ids):
        """Every position's hidden state after the final norm, [len(token_ids), hidden_size]."""
        c, w = self.config, self.w
        n = len(token_ids)
        x = w["model.embed_tokens.weight"][torch.tensor(token_ids, dtype=torch.long)]
        angles = torch.arange(n, dtype=torch.float32)[:, None] * self.inv_freq[None, :].float()
        cos = (angles.cos() * self.attention_scaling).to(self.dtype)[:, None, :]
        sin = (angles.sin() * self.attention_scaling).to(self.dtype)[:, None, :]
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            x = x + self.attention(self.rms_norm(x, w[p + "input_layernorm.weight"]), layer, cos, sin)
            x = x + self.experts(self.rms_norm(x, w[p + "post_attention_layernorm.weight"]), layer)
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


if __name__ == "__main__":
    import tempfile

    assert check_mxfp4_against_definition()
    inv_freq, factor = yarn_inv_freq(GPT_OSS_CONFIG)
    print("yarn inv_freq", [round(float(f), 6) for f in inv_freq], "attention factor", round(factor, 6))
    prompt = [5, 17, 42, 99, 250]
    with tempfile.TemporaryDirectory() as root:
        results = {}
        for name, mxfp4 in (("float32", False), ("mxfp4", True)):
            folder = write_checkpoint(os.path.join(root, name), mxfp4=mxfp4)
            stored = load_safetensors(os.path.join(folder, "model.safetensors"))
            if mxfp4:
                print("blocks", tuple(stored["model.layers.0.mlp.experts.gate_up_proj_blocks"].shape),
                      tuple(stored["model.layers.0.mlp.experts.down_proj_blocks"].shape),
                      stored["model.layers.0.mlp.experts.down_proj_scales"].dtype)
            reference = GptOssReference(folder)
            continuation, logits = reference.greedy(prompt, 8)
            assert torch.isfinite(logits).all()
            results[name] = (continuation, logits)
            print(name, "continuation", continuation, "largest |logit| %.3f" % float(logits.abs().max()),
                  "logit std %.3f" % float(logits.std()),
                  "experts of layer 1:", reference.expert_choices[1][-1].tolist())
        # The same seed is the same model both ways; MXFP4 values are exact in float32.
        assert results["float32"][0] == results["mxfp4"][0]
        assert torch.equal(results["float32"][1], results["mxfp4"][1])
        bf16 = GptOssReference(os.path.join(root, "mxfp4"), dtype=torch.bfloat16)
        continuation, logits = bf16.greedy(prompt, 8)
        print("bfloat16 continuation", continuation, "largest |logit| difference to float32 %.3f"
              % float((logits - results["float32"][1]).abs().max()))
