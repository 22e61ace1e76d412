"""Architecture sizes of a Llama-family model (Llama, Mistral, Qwen2, Qwen3, SmolLM3, Phi-3, Granite, Gemma 3), read
from a Hugging Face config.json or given directly."""
import dataclasses
import json
import math
from typing import Optional

from .gemma3 import GEMMA3_MODEL_TYPES, check_gemma3, gemma3_layer_types, gemma3_rope, gemma3_text_config
from .gpt_oss import gpt_oss_model_config, yarn_inverse_frequencies
from .moe import MOE_MODEL_TYPES, moe_settings

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "smollm3", "phi3", "granite", "gemma3_text", "gemma3",
                         "qwen3_moe", "mixtral", "gpt_oss")
# Hugging Face's SmolLM3Config defaults where config.json leaves a key out.
SMOLLM3_DEFAULT_ROPE_THETA = 2000000.0
SMOLLM3_DEFAULT_NO_ROPE_LAYER_INTERVAL = 4


class ExportError(Exception):
    """A checkpoint or request the exporter cannot turn into a package; the message says why."""


def read_hf_config(path) -> dict:
    """A Hugging Face config.json as a dict."""
    try:
        with open(path, encoding="utf-8") as f:
            hf = json.load(f)
    except FileNotFoundError:
        raise ExportError(f"{path} not found") from None
    except ValueError as error:
        raise ExportError(f"{path} is not JSON ({error})") from None
    if not isinstance(hf, dict):
        raise ExportError(f"{path} is not a JSON object")
    return hf


def check_qwen3(hf: dict, model_type: str = "qwen3") -> None:
    """What a Qwen3 (or Qwen3-MoE) config may ask for that this llmc does not serve, refused by name:
    sliding-window layers (use_sliding_window, or a sliding_attention entry in layer_types; Qwen3 checkpoints
    attend to the whole context) and attention_bias, which in Qwen3 also gives o_proj a bias."""
    if hf.get("attention_bias"):
        raise ExportError(f"{model_type} with attention_bias: true is not supported (its o_proj bias has no operand "
                          "here)")
    if hf.get("use_sliding_window"):
        raise ExportError(f"{model_type} with use_sliding_window: true is not supported (per-layer attention windows "
                          "are not served yet); set it to false to export the model with full attention in every "
                          "layer")
    layer_types = hf.get("layer_types") or []
    if not isinstance(layer_types, list) or any(kind != "full_attention" for kind in layer_types):
        raise ExportError(f"{model_type} layer_types other than full_attention are not supported: {layer_types}")


def smollm3_nope_layers(hf: dict) -> tuple:
    """The layers of a SmolLM3 config that skip RoPE, as Hugging Face reads them: no_rope_layers holds one entry
    per layer (at least num_hidden_layers of them), 1 for a layer with RoPE and 0 for a NoPE layer; without it,
    every no_rope_layer_interval-th layer (default 4: layers 3, 7, ...) is a NoPE layer."""
    num_layers = int(hf["num_hidden_layers"])
    flags = hf.get("no_rope_layers")
    if flags is None:
        interval = int(hf.get("no_rope_layer_interval") or SMOLLM3_DEFAULT_NO_ROPE_LAYER_INTERVAL)
        flags = [int((layer + 1) % interval != 0) for layer in range(num_layers)]
    if not isinstance(flags, list) or len(flags) < num_layers or any(flag not in (0, 1) for flag in flags):
        raise ExportError(f"smollm3 no_rope_layers must list 1 (RoPE) or 0 (no RoPE) for each of the "
                          f"{num_layers} layers, got {flags}")
    return tuple(layer for layer in range(num_layers) if flags[layer] == 0)


def check_smollm3(hf: dict) -> None:
    """What a SmolLM3 config may ask for that this llmc does not serve, refused by name: attention_bias (which
    in SmolLM3 also biases o_proj), mlp_bias, an activation other than SiLU, and sliding-window layers
    (use_sliding_window with a sliding_window makes the NoPE layers windowed; or sliding_attention in
    layer_types). A sliding_window while use_sliding_window is false is ignored, as Hugging Face ignores it."""
    if hf.get("attention_bias"):
        raise ExportError("smollm3 with attention_bias: true is not supported (its o_proj bias has no operand here)")
    if hf.get("mlp_bias"):
        raise ExportError("smollm3 with mlp_bias: true is not supported (the MLP projections have no bias here)")
    if hf.get("hidden_act", "silu") != "silu":
        raise ExportError(f"smollm3 with hidden_act '{hf.get('hidden_act')}' is not supported (only silu)")
    if hf.get("use_sliding_window") and hf.get("sliding_window") is not None and smollm3_nope_layers(hf):
        raise ExportError("smollm3 with use_sliding_window: true is not supported (its NoPE layers would attend "
                          "to a window; per-layer attention windows are not served yet)")
    layer_types = hf.get("layer_types") or []
    if not isinstance(layer_types, list) or any(kind != "full_attention" for kind in layer_types):
        raise ExportError(f"smollm3 layer_types other than full_attention are not supported: {layer_types}")


def check_granite(hf: dict) -> None:
    """What a Granite config may ask for that this llmc does not serve, refused by name: attention_bias (which in
    Granite also biases o_proj), mlp_bias, an activation other than SiLU, and non-positive multipliers (the
    export folds them into the weights and the attention scale)."""
    if hf.get("attention_bias"):
        raise ExportError("granite with attention_bias: true is not supported (its o_proj bias has no operand here)")
    if hf.get("mlp_bias"):
        raise ExportError("granite with mlp_bias: true is not supported (the MLP projections have no bias here)")
    if hf.get("hidden_act", "silu") != "silu":
        raise ExportError(f"granite with hidden_act '{hf.get('hidden_act')}' is not supported (only silu)")
    for key in GRANITE_MULTIPLIERS:
        value = hf.get(key, 1.0)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            raise ExportError(f"granite {key} must be a positive number, got {value!r}")


# Granite's four multipliers (Hugging Face's GraniteConfig defaults them all to 1.0): the embeddings are scaled by
# embedding_multiplier, each attention and MLP output by residual_multiplier before its residual add, the attention
# scores by attention_multiplier (in place of head_dim ** -0.5), and the logits divided by logits_scaling.
GRANITE_MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")


# The model types whose sliding windows are served as per-layer attention windows (the other types' configs
# either ignore sliding_window or cap the context at it).
WINDOWED_MODEL_TYPES = ("mistral", "qwen2", "phi3", "mixtral")
QWEN2_DEFAULT_MAX_WINDOW_LAYERS = 28


def layer_windows(hf: dict, model_type: str, max_context_length: int) -> tuple:
    """Each layer's attention window (0: the whole context) as Hugging Face reads the config: Mistral and Phi-3
    attend through sliding_window in every layer; Qwen2 only with use_sliding_window, in the layers layer_types names
    sliding_attention or, without it, from max_window_layers (default 28) on. A window that covers
    max_position_embeddings changes nothing and is left out (0), so such a package stays an unwindowed one."""
    num_layers = int(hf["num_hidden_layers"])
    window = int(hf.get("sliding_window") or 0)
    if model_type not in WINDOWED_MODEL_TYPES or window <= 0 or window >= max_context_length:
        return ()
    if model_type in ("mistral", "phi3", "mixtral"):
        return (window,) * num_layers
    if not hf.get("use_sliding_window"):
        return ()
    layer_types = hf.get("layer_types")
    if layer_types is None:
        first = int(hf.get("max_window_layers", QWEN2_DEFAULT_MAX_WINDOW_LAYERS))
        layer_types = ["sliding_attention" if layer >= first else "full_attention" for layer in range(num_layers)]
    if (not isinstance(layer_types, list) or len(layer_types) < num_layers
            or any(kind not in ("sliding_attention", "full_attention") for kind in layer_types)):
        raise ExportError(f"qwen2 layer_types must name sliding_attention or full_attention for each of the "
                          f"{num_layers} layers, got {layer_types}")
    windows = tuple(window if kind == "sliding_attention" else 0 for kind in layer_types[:num_layers])
    return windows if any(windows) else ()


def check_phi3(hf: dict, head_dim: int, rope_scaling: Optional[dict]) -> tuple:
    """(rotary_dim, LongRoPE attention factor, original_max_position_embeddings or 0) of a Phi-3 / Phi-4-mini
    config, as Hugging Face's Phi3 reads it; what it cannot serve is refused by name. partial_rotary_factor
    rotates the first int(head_dim * factor) dims of each head. LongRoPE (rope_scaling type longrope, or the
    legacy su) divides those inverse frequencies by short_factor (long_factor once a forward's sequence is
    longer than original_max_position_embeddings) and multiplies cos and sin by the attention factor (given,
    or sqrt(1 + ln(max_position_embeddings / original) / ln(original)), 1 when that ratio is at most 1)."""
    if hf.get("attention_bias"):
        raise ExportError("phi3 with attention_bias: true is not supported (Phi-3 checkpoints have no biases)")
    if hf.get("hidden_act", "silu") != "silu":
        raise ExportError(f"phi3 with hidden_act '{hf.get('hidden_act')}' is not supported (only silu)")
    scaling = rope_scaling or {}
    factor = float(hf.get("partial_rotary_factor", scaling.get("partial_rotary_factor", 1.0)))
    rotary_dim = int(head_dim * factor)
    if not 0 < rotary_dim <= head_dim or rotary_dim % 2 != 0:
        raise ExportError(f"phi3 partial_rotary_factor {factor} gives rotary_dim {rotary_dim} of head_dim "
                          f"{head_dim}; it must be even and positive")
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return rotary_dim, 1.0, 0
    if kind not in ("longrope", "su"):
        raise ExportError(f"phi3 rope_scaling type '{kind}' is not supported (supported: longrope, su)")
    for key in ("short_factor", "long_factor"):
        values = scaling.get(key)
        if not isinstance(values, list) or len(values) != rotary_dim // 2:
            raise ExportError(f"phi3 rope_scaling {key} must list rotary_dim / 2 = {rotary_dim // 2} factors")
    maximum = int(hf.get("max_position_embeddings", 4096))
    original = int(hf.get("original_max_position_embeddings") or scaling.get("original_max_position_embeddings")
                   or maximum)
    attention_factor = scaling.get("attention_factor")
    if attention_factor is None:
        ratio = maximum / original
        attention_factor = 1.0 if ratio <= 1.0 else math.sqrt(1 + math.log(ratio) / math.log(original))
    return rotary_dim, float(attention_factor), original


def rope_settings(hf: dict, model_type: str) -> tuple:
    """(rope_theta, rope_scaling) of a config: the classic keys, or the rope_parameters dict newer Hugging Face
    configs write instead (its rope_type "default" means no scaling)."""
    parameters = hf.get("rope_parameters") if isinstance(hf.get("rope_parameters"), dict) else {}
    default_theta = SMOLLM3_DEFAULT_ROPE_THETA if model_type == "smollm3" else 10000.0
    theta = hf.get("rope_theta", parameters.get("rope_theta", default_theta))
    scaling = hf.get("rope_scaling")
    if scaling is None and parameters.get("rope_type", parameters.get("type", "default")) != "default":
        scaling = parameters
    return float(theta), scaling


@dataclasses.dataclass
class ModelConfig:
    architecture: str = "qwen2"
    vocab_size: int = 151936
    hidden_size: int = 896
    intermediate_size: int = 4864
    num_layers: int = 24
    num_heads: int = 14
    num_kv_heads: int = 2
    head_dim: int = 64
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1000000.0
    rope_scaling: Optional[dict] = None
    qkv_bias: bool = True
    tie_word_embeddings: bool = True
    max_context_length: int = 32768
    bos_token_id: Optional[int] = None
    eos_token_ids: tuple = ()
    # The config's attention window; 0: none. Mistral and Qwen2 serve it through layer_windows over their full
    # context; for another model type the engine would attend to the whole context, so such a package serves at
    # most that many tokens (max_context_length is capped to it) rather than answer wrong.
    sliding_window: int = 0
    # Per-layer attention windows: layer i attends to the last layer_windows[i] positions only (0: the whole
    # context); empty: no layer has a window. Packages that use them are format version 8 (package.py).
    layer_windows: tuple = ()
    # Qwen3's QK-norm: an RMSNorm (weights of size head_dim, the layer's rms_norm_eps) on each head of q and k
    # after the projection and before RoPE.
    qk_norm: bool = False
    # SmolLM3's NoPE layers: the indices of the layers whose q and k are not rotated (empty: all are).
    nope_layers: tuple = ()
    # Phi-3's partial rotary: the first rotary_dim dims of each head are rotated (0: all of them). The export
    # permutes each head's q and k rows so that the kernel's (i, i + head_dim / 2) pairs are Hugging Face's
    # (i, i + rotary_dim / 2) pairs for i < rotary_dim / 2; the other pairs get inverse frequency 0 (cos 1, sin 0).
    rotary_dim: int = 0
    # LongRoPE's attention factor on cos and sin, folded at export into the rotated q and k rows.
    rope_attention_factor: float = 1.0
    # LongRoPE's factor list at every position: "short" (the context capped at original_max_position_embeddings)
    # or "long" (the whole max_position_embeddings context; serve_long_rope_factors). longrope_maximum: the
    # config's max_position_embeddings, 0 for other models.
    longrope_factors: str = "short"
    longrope_maximum: int = 0
    # The attention softmax scale; 0: head_dim ** -0.5. Granite's attention_multiplier.
    attention_scale: float = 0.0
    # Granite's other multipliers, folded into the weights at export (granite.py): embedding_multiplier into the
    # embedding, residual_multiplier into o_proj and down_proj, 1 / logits_scaling (and, with a tied head,
    # 1 / embedding_multiplier) into the final norm's weight.
    embedding_multiplier: float = 1.0
    residual_multiplier: float = 1.0
    logits_scaling: float = 1.0
    # Gemma 3 (gemma3.py): the attention and MLP outputs RMS-normalized before their residual adds
    # (post_attention_layernorm, post_feedforward_layernorm) and the MLP input by pre_feedforward_layernorm.
    sandwich_norms: bool = False
    # The MLP's activation of the gate: "silu" (SwiGLU) or "gelu_tanh" (GeGLU, gelu_pytorch_tanh).
    hidden_activation: str = "silu"
    # Gemma 3's local layers rotate with their own base (rope_local_base_freq, unscaled): the indices of those
    # layers and the base.
    local_rope_layers: tuple = ()
    local_rope_theta: float = 10000.0
    # tanh soft-capping of the logits: cap * tanh(logits / cap); 0: none.
    final_logit_softcapping: float = 0.0
    # The config's model_type where it differs from architecture (gemma3: the multimodal layout of the checkpoint).
    source_model_type: str = ""
    # Mixtures of experts (moe.py): the layers whose MLP routes each token to experts_per_token of num_experts
    # SwiGLU experts of moe_intermediate_size (empty: every layer is dense), their router probabilities
    # renormalized to sum 1 when normalize_top_k.
    moe_layers: tuple = ()
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    normalize_top_k: bool = False
    # How the experts route and activate: "softmax_topk" (Qwen3-MoE, Mixtral) or "clamped_swiglu" (GPT-OSS: router
    # and expert biases, top-k logits then their softmax, (clamp(up, ±limit) + 1) · g · σ(alpha · g)).
    moe_variant: str = "softmax_topk"
    swiglu_limit: float = 7.0
    swiglu_alpha: float = 1.702
    # GPT-OSS's attention: a bias on o_proj, and a learned sink logit per head in every softmax.
    o_proj_bias: bool = False
    attention_sinks: bool = False

    def validate(self):
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                     "head_dim", "max_context_length"):
            if getattr(self, name) <= 0:
                raise ExportError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads != 0:
            raise ExportError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.head_dim % 2 != 0:
            raise ExportError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if self.layer_windows and (len(self.layer_windows) != self.num_layers
                                   or any(window < 0 for window in self.layer_windows)):
            raise ExportError(f"layer_windows must give each of the {self.num_layers} layers a window >= 0, got "
                              f"{list(self.layer_windows)}")
        if any(not 0 <= layer < self.num_layers for layer in self.nope_layers):
            raise ExportError(f"nope_layers {list(self.nope_layers)} name layers outside 0..{self.num_layers - 1}")
        if self.hidden_activation not in ("silu", "gelu_tanh"):
            raise ExportError(f"hidden_activation must be silu or gelu_tanh, got {self.hidden_activation}")
        if self.moe_layers and not (0 < self.experts_per_token <= self.num_experts and self.moe_intermediate_size > 0
                                    and all(0 <= layer < self.num_layers for layer in self.moe_layers)):
            raise ExportError(f"mixture of experts needs 0 < experts_per_token ({self.experts_per_token}) <= "
                              f"num_experts ({self.num_experts}), a positive moe_intermediate_size and moe_layers "
                              f"within 0..{self.num_layers - 1}")
        if any(not 0 <= layer < self.num_layers for layer in self.local_rope_layers):
            raise ExportError(f"local_rope_layers {list(self.local_rope_layers)} name layers outside "
                              f"0..{self.num_layers - 1}")
        if self.rope_scaling is not None:
            kind = self.rope_scaling.get("rope_type", self.rope_scaling.get("type"))
            if kind == "yarn" and self.architecture == "gpt_oss":
                pass
            elif kind in ("longrope", "su") and self.architecture == "phi3":
                pass  # check_phi3; one factor list at every position (serve_long_rope_factors)
            elif kind not in ("linear", "llama3", "default"):
                raise ExportError(f"unsupported rope_scaling type '{kind}' (supported: linear, llama3)")
        return self

    def serve_long_rope_factors(self):
        """LongRoPE's long factors at every position and the whole max_position_embeddings context, as llama.cpp
        serves a context beyond the original one. Hugging Face uses them for a forward whose sequence is longer
        than original_max_position_embeddings, so such sequences are exact; shorter ones get the long rotation
        where Hugging Face would use the short one. One list for every position keeps every cached key, and every
        prefix-cache block, rotated as the query that reads it."""
        if not self.longrope_maximum:
            raise ExportError("--rope-factors long applies to LongRoPE models (phi3 with rope_scaling longrope or su "
                              "and max_position_embeddings beyond original_max_position_embeddings) only")
        self.longrope_factors = "long"
        self.max_context_length = self.longrope_maximum
        return self

    def inverse_frequencies(self):
        """RoPE inverse frequencies with the configured scaling applied."""
        dim = self.rotary_dim or self.head_dim
        inv_freq = [1.0 / (self.rope_theta ** (i / dim)) for i in range(0, dim, 2)]
        scaling = self.rope_scaling or {}
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        if kind == "yarn":  # GPT-OSS; its attention factor is folded into q and k at export (gpt_oss.py)
            inv_freq = yarn_inverse_frequencies(dim, self.rope_theta, scaling, self.max_context_length)[0]
        if kind in ("longrope", "su"):  # one factor list at every position (serve_long_rope_factors)
            factors = scaling["long_factor" if self.longrope_factors == "long" else "short_factor"]
            inv_freq = [f / float(factor) for f, factor in zip(inv_freq, factors)]
        if kind == "linear":
            inv_freq = [f / float(scaling["factor"]) for f in inv_freq]
        elif kind == "llama3":
            factor = float(scaling["factor"])
            low, high = float(scaling.get("low_freq_factor", 1.0)), float(scaling.get("high_freq_factor", 4.0))
            original = float(scaling["original_max_position_embeddings"])
            low_wavelength, high_wavelength = original / low, original / high
            scaled = []
            for f in inv_freq:
                wavelength = 2 * math.pi / f
                if wavelength < high_wavelength:
                    scaled.append(f)
                elif wavelength > low_wavelength:
                    scaled.append(f / factor)
                else:
                    smooth = (original / wavelength - low) / (high - low)
                    scaled.append((1 - smooth) * f / factor + smooth * f)
            inv_freq = scaled
        # Partial rotary: the pass-through pairs turn by angle 0 (cos 1, sin 0).
        return inv_freq + [0.0] * (self.head_dim // 2 - len(inv_freq))

    def local_inverse_frequencies(self):
        """The inverse frequencies of the local layers' RoPE (local_rope_theta, never scaled)."""
        return [1.0 / (self.local_rope_theta ** (i / self.head_dim)) for i in range(0, self.head_dim, 2)]

    @staticmethod
    def from_hf_config(path):
        return ModelConfig.from_hf_config_dict(read_hf_config(path))

    @staticmethod
    def from_hf_config_dict(hf):
        model_type = hf.get("model_type", "")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ExportError(f"unsupported architecture '{model_type}' (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
        if model_type in ("qwen3", "qwen3_moe"):
            check_qwen3(hf, model_type)
        if model_type in GEMMA3_MODEL_TYPES:
            return gemma3_model_config(hf)
        if model_type == "gpt_oss":
            return gpt_oss_model_config(hf).validate()
        try:
            if model_type == "smollm3":
                check_smollm3(hf)
            if model_type == "granite":
                check_granite(hf)
            rope_theta, rope_scaling = rope_settings(hf, model_type)
            num_heads = int(hf["num_attention_heads"])
            hidden = int(hf["hidden_size"])
            eos = hf.get("eos_token_id")
            config = ModelConfig(
                architecture=model_type,
                vocab_size=int(hf["vocab_size"]),
                hidden_size=hidden,
                intermediate_size=int(hf["intermediate_size"]),
                num_layers=int(hf["num_hidden_layers"]),
                num_heads=num_heads,
                num_kv_heads=int(hf.get("num_key_value_heads") or num_heads),
                head_dim=int(hf.get("head_dim") or hidden // num_heads),
                rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
                rope_theta=rope_theta,
                rope_scaling=rope_scaling,
                qkv_bias=model_type == "qwen2" or bool(hf.get("attention_bias", False)),
                qk_norm=model_type in ("qwen3", "qwen3_moe"),
                # SmolLM3's config defaults to a tied head, the others' to an untied one.
                tie_word_embeddings=bool(hf.get("tie_word_embeddings", model_type == "smollm3")),
                max_context_length=int(hf.get("max_position_embeddings", 4096)),
                bos_token_id=hf.get("bos_token_id"),
                eos_token_ids=tuple(eos if isinstance(eos, list) else [eos] if eos is not None else []),
                # Qwen3 and SmolLM3 ignore sliding_window unless use_sliding_window (refused above), as Hugging
                # Face does.
                sliding_window=0 if model_type in ("qwen3", "qwen3_moe", "smollm3") else int(hf.get("sliding_window") or 0),
                nope_layers=smollm3_nope_layers(hf) if model_type == "smollm3" else (),
                layer_windows=layer_windows(hf, model_type, int(hf.get("max_position_embeddings", 4096))),
            )
            if model_type in MOE_MODEL_TYPES:
                for key, value in moe_settings(hf, model_type, config.num_layers).items():
                    setattr(config, key, value)
            if model_type == "granite":
                config.attention_scale = float(hf.get("attention_multiplier", 1.0))
                config.embedding_multiplier = float(hf.get("embedding_multiplier", 1.0))
                config.residual_multiplier = float(hf.get("residual_multiplier", 1.0))
                config.logits_scaling = float(hf.get("logits_scaling", 1.0))
            if model_type == "qwen2" and not hf.get("use_sliding_window"):
                config.sliding_window = 0  # ignored, as Hugging Face ignores it
            if model_type == "phi3":
                config.rotary_dim, config.rope_attention_factor, original = check_phi3(hf, config.head_dim,
                                                                                      rope_scaling)
                # By default LongRoPE's short factors are served (Hugging Face switches a whole forward to the
                # long ones past original_max_position_embeddings), so the package's context stops there.
                if 0 < original < config.max_context_length:
                    config.longrope_maximum = config.max_context_length
                    config.max_context_length = original
            if model_type not in WINDOWED_MODEL_TYPES and 0 < config.sliding_window < config.max_context_length:
                config.max_context_length = config.sliding_window
        except KeyError as missing:
            raise ExportError(f"config.json lacks {missing}") from None
        return config.validate()

    def add_generation_eos(self, path):
        """Adds the EOS ids of a generation_config.json (an id or a list; chat models often list several)."""
        try:
            with open(path, encoding="utf-8") as f:
                generation = json.load(f)
        except FileNotFoundError:
            return self
        except ValueError as error:
            raise ExportError(f"{path} is not JSON ({error})") from None
        eos = generation.get("eos_token_id")
        extra = eos if isinstance(eos, list) else [eos] if eos is not None else []
        if any(not isinstance(token, int) for token in extra):
            raise ExportError(f"{path}: eos_token_id must be an id or a list of ids")
        self.eos_token_ids = tuple(dict.fromkeys(list(self.eos_token_ids) + extra))
        return self


def gemma3_model_config(hf: dict) -> ModelConfig:
    """A Gemma 3 text config (gemma3_text, or a gemma3 config's text_config) as the package's ModelConfig
    (gemma3.py says what each setting becomes)."""
    text = gemma3_text_config(hf)
    check_gemma3(text)
    try:
        layer_types = gemma3_layer_types(text)
        rope_theta, rope_scaling, local_theta = gemma3_rope(text)
        num_layers = int(text["num_hidden_layers"])
        maximum = int(text["max_position_embeddings"])
        window = int(text.get("sliding_window") or 0)
        eos = text.get("eos_token_id")
        sliding = tuple(layer for layer in range(num_layers) if layer_types[layer] == "sliding_attention")
        cap = text.get("final_logit_softcapping")
        config = ModelConfig(
            architecture="gemma3",
            vocab_size=int(text["vocab_size"]),
            hidden_size=int(text["hidden_size"]),
            intermediate_size=int(text["intermediate_size"]),
            num_layers=num_layers,
            num_heads=int(text["num_attention_heads"]),
            num_kv_heads=int(text["num_key_value_heads"]),
            head_dim=int(text["head_dim"]),
            rms_norm_eps=float(text["rms_norm_eps"]),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            qkv_bias=False,
            qk_norm=True,
            tie_word_embeddings=bool(text["tie_word_embeddings"]),
            max_context_length=maximum,
            bos_token_id=text.get("bos_token_id"),
            eos_token_ids=tuple(eos if isinstance(eos, list) else [eos] if eos is not None else []),
            # A window that covers the whole context changes nothing (the local layers keep their RoPE base).
            layer_windows=(tuple(window if layer in sliding else 0 for layer in range(num_layers))
                           if sliding and 0 < window < maximum else ()),
            attention_scale=float(text["query_pre_attn_scalar"]) ** -0.5,
            sandwich_norms=True,
            hidden_activation="gelu_tanh",
            local_rope_layers=sliding,
            local_rope_theta=local_theta,
            final_logit_softcapping=float(cap) if cap is not None else 0.0,
            source_model_type=hf.get("model_type", ""),
        )
    except KeyError as missing:
        raise ExportError(f"config.json lacks {missing}") from None
    except (TypeError, ValueError) as error:
        raise ExportError(f"gemma3 config.json has a value of the wrong type ({error})") from None
    return config.validate()
