"""Gemma 3 text checkpoints (model_type gemma3_text, and the text tower of gemma3 multimodal ones) written as Hugging
Face lays them out, and an independent forward of such a folder.

The forward is written from Hugging Face's Gemma 3 semantics (Gemma3ForCausalLM, and the language model of
Gemma3ForConditionalGeneration), not from the exporter's network: it reads config.json and model.safetensors itself
and recomputes the whole sequence with plain masked attention. It imports nothing from tools/llmc_export.
- The embedding is scaled by sqrt(hidden_size), the scale (a float32 tensor) cast to the weights' dtype first.
- Gemma's RMSNorm: in float32, x * rsqrt(mean(x^2) + eps) * (1 + weight), cast back to the input's dtype (the
  weight is added to 1 before the product, and the product is taken in float32, unlike Llama's).
- Per layer: x + post_attention_layernorm(attention(input_layernorm(x))), then
  x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))).
- Attention: q/k/v projections (no bias); q and k viewed as heads, each head normalized by q_norm / k_norm (the same
  (1 + w) RMSNorm over head_dim) before RoPE (rotate-half); grouped-query attention scaled by
  query_pre_attn_scalar ** -0.5 (not head_dim), causal; a sliding layer attends to keys with
  position > query position - sliding_window (the window counts the query itself), a full layer to all before.
- Layer kinds: config.json's layer_types when given, else sliding unless (i + 1) % sliding_window_pattern == 0
  (default 6: five sliding layers, then a full one).
- RoPE: full layers use rope_theta with rope_scaling (none/default, or linear: inverse frequencies divided by
  factor); sliding layers use rope_local_base_freq (default 10000) unscaled. Newer configs give both in
  rope_parameters {"full_attention": {...}, "sliding_attention": {...}}.
- MLP: down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)).
- Final norm, the LM head (the embedding unless tie_word_embeddings is false), then final_logit_softcapping when set:
  tanh(logits / cap) * cap.
Hugging Face's Gemma3Attention does not pass attn_logit_softcapping to its attention function (it is a config field
Gemma 3 never uses); this reference refuses a config that sets it, as the exporter should.
In bfloat16 it keeps Hugging Face's roundings: the norms in float32 cast back, rotary tables computed in float32 and
cast to the activations' dtype, the softmax in float32, the softcap in the activations' dtype.
"""
import json
import os

import torch
import torch.nn.functional as F

from qwen3_reference import load_safetensors, save_safetensors  # the file format only

# Eight layers: with sliding_window_pattern 3, layers 2 and 5 are full, the others slide over 8 positions (fewer than
# the scenario's prompts of 17, 33 and 40 tokens and its 32 decode steps). head_dim 32 is not hidden / heads (16),
# query_pre_attn_scalar 24 is not head_dim, the two RoPE bases differ and the full layers' is linearly scaled (as in
# Gemma 3 4B and larger); the final softcap is on (as Gemma 2's, to exercise it: Gemma 3's own checkpoints leave it
# null).
GEMMA3_CONFIG = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 512, "hidden_size": 64,
    "intermediate_size": 160, "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "query_pre_attn_scalar": 24, "sliding_window": 8,
    "sliding_window_pattern": 3, "final_logit_softcapping": 30.0, "attn_logit_softcapping": None,
    "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": True, "bos_token_id": 2,
    "eos_token_id": 1, "pad_token_id": 0, "torch_dtype": "float32", "use_cache": True,
}

# Gemma3TextConfig's defaults (configuration_gemma3.py): a gemma3 config.json's text_config often lists only a few.
TEXT_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0, "rope_scaling": None, "query_pre_attn_scalar": 256, "sliding_window": 4096,
    "sliding_window_pattern": 6, "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "attention_bias": False,
}

# Where a gemma3 (multimodal) checkpoint keeps the text tower: transformers before 4.52 saved
# Gemma3ForConditionalGeneration as language_model.model.* and language_model.lm_head.weight; newer ones save
# model.language_model.* and lm_head.weight.
MULTIMODAL_PREFIXES = {"old": ("language_model.model.", "language_model.lm_head.weight"),
                       "new": ("model.language_model.", "lm_head.weight")}


def text_config(hf_config):
    """The text model's settings with Gemma3TextConfig's defaults filled in (a gemma3 config's text_config)."""
    if hf_config.get("model_type") == "gemma3":
        text = dict(hf_config.get("text_config") or {})
        if "tie_word_embeddings" not in text:
            text["tie_word_embeddings"] = hf_config.get("tie_word_embeddings", True)
    else:
        text = dict(hf_config)
    text.setdefault("tie_word_embeddings", True)
    for key, value in TEXT_DEFAULTS.items():
        text.setdefault(key, value)
    return text


def layer_types(text):
    """Each layer's kind, "sliding_attention" or "full_attention"."""
    layers = text["num_hidden_layers"]
    if text.get("layer_types"):
        return list(text["layer_types"][:layers])
    pattern = text.get("sliding_window_pattern") or 6
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]


def rope_settings(text):
    """{"full_attention": (theta, linear factor), "sliding_attention": (theta, linear factor)} from rope_theta,
    rope_scaling and rope_local_base_freq, or from newer configs' rope_parameters."""
    params = text.get("rope_parameters")
    if isinstance(params, dict) and ("full_attention" in params or "sliding_attention" in params):
        full = dict(params.get("full_attention") or {})
        sliding = dict(params.get("sliding_attention") or {})
    else:
        full = dict(params or {})  # a flat rope_parameters holds the global (full-layer) settings
        full.update(text.get("rope_scaling") or {})
        sliding = {"rope_type": "default"}
    full.setdefault("rope_theta", text.get("rope_theta") or 1000000.0)
    sliding.setdefault("rope_theta", text.get("rope_local_base_freq") or 10000.0)

    def factor(settings, kind):
        kind_type = settings.get("rope_type", settings.get("type", "default"))
        if kind_type in (None, "default"):
            return 1.0
        if kind_type == "linear":
            return float(settings["factor"])
        raise NotImplementedError(f"the reference has no rope type {kind_type!r} ({kind})")

    return {"full_attention": (float(full["rope_theta"]), factor(full, "full_attention")),
            "sliding_attention": (float(sliding["rope_theta"]), factor(sliding, "sliding_attention"))}


def checkpoint_tensors(text, seed):
    """Random weights under gemma3_text's names and shapes (model.*, lm_head.weight when untied). Every norm weight
    is random, since the norm multiplies by 1 + w: the input, pre-feedforward, q and k norms' w about N(0, 0.1);
    the post-attention, post-feedforward and final norms' about 1 + N(0, 0.3), which lets the layers outweigh the
    embedding in the residual (a tied head otherwise keeps predicting the last token). The embedding's small std
    is multiplied by sqrt(hidden_size) on the way in; logits spread over a few units."""
    generator = torch.Generator().manual_seed(seed)
    h, i, v, d = text["hidden_size"], text["intermediate_size"], text["vocab_size"], text["head_dim"]
    q, kv = text["num_attention_heads"] * d, text["num_key_value_heads"] * d

    def matrix(rows, columns, std=None):
        return torch.randn(rows, columns, generator=generator) * (std or columns ** -0.5)

    def norm(size):
        return 0.1 * torch.randn(size, generator=generator)

    def output_norm(size):
        return 1.0 + 0.3 * torch.randn(size, generator=generator)

    tensors = {"model.embed_tokens.weight": matrix(v, h, 0.1), "model.norm.weight": output_norm(h)}
    if not text["tie_word_embeddings"]:
        tensors["lm_head.weight"] = matrix(v, h, 0.3)
    for layer in range(text["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        tensors.update({
            p + "input_layernorm.weight": norm(h), p + "post_attention_layernorm.weight": output_norm(h),
            p + "pre_feedforward_layernorm.weight": norm(h), p + "post_feedforward_layernorm.weight": output_norm(h),
            p + "self_attn.q_proj.weight": matrix(q, h), p + "self_attn.k_proj.weight": matrix(kv, h),
            p + "self_attn.v_proj.weight": matrix(kv, h), p + "self_attn.o_proj.weight": matrix(h, q),
            p + "self_attn.q_norm.weight": norm(d), p + "self_attn.k_norm.weight": norm(d),
            p + "mlp.gate_proj.weight": matrix(i, h), p + "mlp.up_proj.weight": matrix(i, h),
            p + "mlp.down_proj.weight": matrix(h, i),
        })
    return tensors


def multimodal_config(hf_config, sparse=False):
    """A gemma3 (Gemma3ForConditionalGeneration) config.json around the text config `hf_config`: the text settings
    under text_config, a small SigLIP vision_config, the image token settings. `sparse` leaves out of text_config
    what Gemma3TextConfig's defaults give (as Google's gemma-3-4b config.json does), and puts tie_word_embeddings
    at the top level only."""
    text = {key: value for key, value in hf_config.items()
            if key not in ("architectures", "torch_dtype", "use_cache", "bos_token_id", "eos_token_id",
                           "pad_token_id")}
    text["model_type"] = "gemma3_text"
    if sparse:
        for key in ("hidden_activation", "rms_norm_eps", "rope_local_base_freq", "attn_logit_softcapping",
                    "attention_bias", "attention_dropout", "tie_word_embeddings", "max_position_embeddings"):
            if key in text and text[key] == TEXT_DEFAULTS.get(key, text[key]):
                text.pop(key)
    top = {
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 16, "intermediate_size": 32,
                          "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                          "vision_use_head": False},
        "mm_tokens_per_image": 4, "boi_token_index": 255999, "eoi_token_index": 256000,
        "image_token_index": 262144, "initializer_range": 0.02,
        "bos_token_id": hf_config.get("bos_token_id", 2), "eos_token_id": [hf_config.get("eos_token_id", 1), 106],
        "pad_token_id": hf_config.get("pad_token_id", 0), "torch_dtype": "float32",
    }
    if "tie_word_embeddings" in hf_config:
        top["tie_word_embeddings"] = hf_config["tie_word_embeddings"]
    return top


def write_checkpoint(folder, hf_config=GEMMA3_CONFIG, seed=11, dtype=torch.float32, layout="text", sparse=False):
    """A Gemma 3 checkpoint folder: config.json, generation_config.json, model.safetensors (a tied head left out,
    as Hugging Face saves it) and a placeholder tokenizer.json. `hf_config` is a gemma3_text config; `layout`
    "text" writes it as it is (Gemma3ForCausalLM), "old" or "new" writes the gemma3 multimodal layout around it
    (multimodal_config(hf_config, sparse); the text tensors under MULTIMODAL_PREFIXES[layout], and a few vision
    tower and projector tensors the text model does not use)."""
    os.makedirs(folder, exist_ok=True)
    dtype_name = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[dtype]
    if layout == "text":
        config = dict(hf_config, torch_dtype=dtype_name)
    else:
        config = dict(multimodal_config(hf_config, sparse), torch_dtype=dtype_name)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    text = text_config(config)
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": hf_config.get("bos_token_id", 2),
                   "eos_token_id": [hf_config.get("eos_token_id", 1), 106]}, f)
    tensors = checkpoint_tensors(text, seed)
    if layout != "text":
        body, head = MULTIMODAL_PREFIXES[layout]
        renamed = {}
        for name, tensor in tensors.items():
            renamed[head if name == "lm_head.weight" else body + name[len("model."):]] = tensor
        outer = "" if layout == "old" else "model."
        generator = torch.Generator().manual_seed(seed + 1)
        renamed.update({
            outer + "vision_tower.vision_model.embeddings.patch_embedding.weight":
                torch.randn(16, 3, 14, 14, generator=generator),
            outer + "vision_tower.vision_model.post_layernorm.weight": torch.randn(16, generator=generator),
            outer + "multi_modal_projector.mm_input_projection_weight":
                torch.randn(16, text["hidden_size"], generator=generator),
            outer + "multi_modal_projector.mm_soft_emb_norm.weight": torch.randn(16, generator=generator),
        })
        tensors = renamed
    save_safetensors(os.path.join(folder, "model.safetensors"), {name: t.to(dtype) for name, t in tensors.items()})
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        f.write('{"version": "1.0"}')
    return folder


def text_tensors(tensors):
    """The text model's tensors under gemma3_text's names (model.*, lm_head.weight), from any of the layouts;
    vision tower and projector tensors dropped."""
    found = {}
    for name, tensor in tensors.items():
        if name.startswith("language_model.model."):
            found["model." + name[len("language_model.model."):]] = tensor
        elif name.startswith("model.language_model."):
            found["model." + name[len("model.language_model."):]] = tensor
        elif name in ("language_model.lm_head.weight", "lm_head.weight"):
            found["lm_head.weight"] = tensor
        elif name.startswith("model.") and not name.startswith(("model.vision_tower.",
                                                                 "model.multi_modal_projector.")):
            found[name] = tensor
    return found


class Gemma3Reference:
    """The forward of a Gemma 3 checkpoint folder in `dtype` (float32 or bfloat16), from Hugging Face's semantics.
    `tensors` replaces the folder's weights. The attributes `layer_types`, `sliding_window` and `rope` (as
    rope_settings gives) may be changed after construction, for the tests to show what each one does."""

    def __init__(self, folder, dtype=torch.float32, tensors=None):
        with open(os.path.join(folder, "config.json")) as f:
            self.hf_config = json.load(f)
        self.config = c = text_config(self.hf_config)
        if c.get("attn_logit_softcapping") is not None:
            raise NotImplementedError("attn_logit_softcapping (Hugging Face's Gemma 3 never applies it)")
        if c["hidden_activation"] != "gelu_pytorch_tanh":
            raise NotImplementedError(f"hidden_activation {c['hidden_activation']!r}")
        tensors = tensors if tensors is not None else load_safetensors(os.path.join(folder, "model.safetensors"))
        self.w = {name: t.to(dtype) for name, t in text_tensors(tensors).items()}
        if c["tie_word_embeddings"]:
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.dtype = dtype
        self.head_dim = c["head_dim"]
        self.layer_types = layer_types(c)
        self.sliding_window = c["sliding_window"]
        self.rope = rope_settings(c)
        self.scaling = c["query_pre_attn_scalar"] ** -0.5
        self.softcap = c.get("final_logit_softcapping")

    def rms_norm(self, x, weight):
        """Gemma's RMSNorm: float32 throughout, (1 + weight), cast back to x's dtype at the end."""
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.config["rms_norm_eps"])
        return (normed * (1.0 + weight.float())).to(x.dtype)

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    def rotary_tables(self, kind, n):
        theta, factor = self.rope[kind]
        d = self.head_dim
        inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d)) / factor
        freqs = torch.arange(n, dtype=torch.float32)[:, None] * inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(self.dtype)[:, None, :], angles.sin().to(self.dtype)[:, None, :]

    def allowed(self, kind, n):
        """[query, key] -> may attend: causal, and on a sliding layer key > query - sliding_window."""
        query, key = torch.arange(n)[:, None], torch.arange(n)[None, :]
        mask = key <= query
        if kind == "sliding_attention" and self.sliding_window:
            mask &= key > query - self.sliding_window
        return mask

    def final_hidden(self, token_ids):
        """Every position's hidden state after the final norm, [len(token_ids), hidden_size]."""
        c, w, d = self.config, self.w, self.head_dim
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        n = len(token_ids)
        embedding = w["model.embed_tokens.weight"]
        scale = torch.tensor(c["hidden_size"] ** 0.5, dtype=torch.float32).to(embedding.dtype)
        x = embedding[torch.tensor(token_ids, dtype=torch.long)] * scale
        tables = {kind: self.rotary_tables(kind, n) for kind in set(self.layer_types)}
        masks = {kind: self.allowed(kind, n) for kind in set(self.layer_types)}
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            kind = self.layer_types[layer]
            cos, sin = tables[kind]
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
            scores = torch.einsum("qhd,khd->hqk", q, k) * self.scaling
            scores = scores.masked_fill(~masks[kind], float("-inf"))
            probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(self.dtype)
            attention = torch.einsum("hqk,khd->qhd", probabilities, v).reshape(n, heads * d)
            x = x + self.rms_norm(self.linear(attention, p + "self_attn.o_proj"),
                                  w[p + "post_attention_layernorm.weight"])
            h = self.rms_norm(x, w[p + "pre_feedforward_layernorm.weight"])
            mlp = self.linear(F.gelu(self.linear(h, p + "mlp.gate_proj"), approximate="tanh")
                              * self.linear(h, p + "mlp.up_proj"), p + "mlp.down_proj")
            x = x + self.rms_norm(mlp, w[p + "post_feedforward_layernorm.weight"])
        return self.rms_norm(x, w["model.norm.weight"])

    def logits(self, token_ids):
        """float32 logits of every position (after the final softcap when the config sets one)."""
        with torch.no_grad():
            logits = self.linear(self.final_hidden(token_ids), "lm_head")
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            return logits.float()

    def greedy(self, prompt, steps):
        """(the greedy continuation, the logits [steps, vocab] that chose each token)."""
        tokens, rows = list(prompt), []
        for _ in range(steps):
            row = self.logits(tokens)[-1]
            rows.append(row)
            tokens.append(int(torch.argmax(row)))
        return tokens[len(prompt):], torch.stack(rows)
