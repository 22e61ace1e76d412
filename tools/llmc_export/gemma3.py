"""Gemma 3 text checkpoints (model_type gemma3_text, and the text tower of gemma3 multimodal ones) as the
Llama-family network reads them.

What Gemma 3 changes against Llama (configuration_gemma3.py, modeling_gemma3.py), and how the package holds it:

- Four norms a layer ("sandwich" norms): the attention and MLP outputs are RMS-normalized (post_attention_layernorm,
  post_feedforward_layernorm) before their residual adds, and the MLP's input goes through pre_feedforward_layernorm.
  The graph passes the output norms to linear_residual (ModelConfig.sandwich_norms).
- Every RMSNorm multiplies by (1 + weight): the exported norm weights hold 1 + weight (computed in float32).
- GeGLU: gelu_pytorch_tanh(gate) * up (rms_norm_gate_up_gelu_tanh).
- Embeddings scaled by sqrt(hidden_size): folded into the embedding matrix, and, with a tied head, the inverse into
  the final norm's weight (as granite.py does for its embedding multiplier).
- Local sliding-window layers and global layers (layer_types, or sliding_window_pattern: every pattern-th layer is
  global), with their own RoPE: rope_local_base_freq unscaled for local layers, rope_theta with rope_scaling for
  global ones (or rope_parameters keyed by layer type, as newer configs write it).
- The attention scale is query_pre_attn_scalar ** -0.5; final_logit_softcapping caps the logits (tanh).
- attn_logit_softcapping (Gemma 2's) is refused: the attention kernels have no soft cap.
"""
import math

import torch

# Gemma3TextConfig's defaults: a gemma3 (multimodal) config.json often lists only a few text_config keys.
GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "bos_token_id": 2, "eos_token_id": 1,
    "tie_word_embeddings": True, "rope_theta": 1000000.0, "attention_bias": False, "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "final_logit_softcapping": None, "attn_logit_softcapping": None, "rope_scaling": None,
    "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
}
GEMMA3_MODEL_TYPES = ("gemma3_text", "gemma3")
# Where a gemma3 (multimodal) checkpoint keeps its text tower: older transformers wrote language_model.model.*,
# newer ones model.language_model.*; the image side is left out of a text package.
TEXT_TOWER_PREFIXES = ("language_model.model.", "model.language_model.")
HEAD_NAMES = ("language_model.lm_head.weight", "lm_head.weight")
IMAGE_PREFIXES = ("vision_tower.", "model.vision_tower.", "multi_modal_projector.", "model.multi_modal_projector.")


def gemma3_text_config(hf: dict) -> dict:
    """The text model's config with Gemma3TextConfig's defaults filled in: a gemma3_text config as it is, or a gemma3
    config's text_config (with the outer config's token ids where the text_config has none)."""
    from .config import ExportError  # config.py imports this module

    if hf.get("model_type") == "gemma3":
        text = hf.get("text_config")
        if not isinstance(text, dict):
            raise ExportError("gemma3 config.json has no text_config object")
        outer = {key: hf[key] for key in ("bos_token_id", "eos_token_id", "tie_word_embeddings") if key in hf}
        text = dict(outer, **text)
    else:
        text = dict(hf)
    return dict(GEMMA3_TEXT_DEFAULTS, **text)


def check_gemma3(text: dict) -> None:
    """What a Gemma 3 text config may ask for that this llmc does not serve, refused by name."""
    from .config import ExportError

    if text.get("attn_logit_softcapping") is not None:
        raise ExportError("gemma3 with attn_logit_softcapping is not supported (the attention kernels have no soft "
                          "cap; Gemma 3 checkpoints leave it null)")
    if text.get("use_bidirectional_attention"):
        raise ExportError("gemma3 with use_bidirectional_attention: true is not supported (an embedding model's "
                          "attention is not causal)")
    if text.get("attention_bias"):
        raise ExportError("gemma3 with attention_bias: true is not supported (Gemma 3 checkpoints have no biases)")
    activation = text.get("hidden_activation") or text.get("hidden_act")
    if activation != "gelu_pytorch_tanh":
        raise ExportError(f"gemma3 with hidden_activation '{activation}' is not supported (only gelu_pytorch_tanh)")
    scalar = text.get("query_pre_attn_scalar")
    if not isinstance(scalar, (int, float)) or isinstance(scalar, bool) or not scalar > 0:
        raise ExportError(f"gemma3 query_pre_attn_scalar must be a positive number, got {scalar!r}")
    cap = text.get("final_logit_softcapping")
    if cap is not None and (not isinstance(cap, (int, float)) or isinstance(cap, bool) or not cap > 0):
        raise ExportError(f"gemma3 final_logit_softcapping must be a positive number or null, got {cap!r}")


def gemma3_layer_types(text: dict) -> list:
    """'sliding_attention' or 'full_attention' for each layer: layer_types as given, or from
    sliding_window_pattern (layer i is global when (i + 1) % pattern == 0)."""
    from .config import ExportError

    num_layers = int(text["num_hidden_layers"])
    layer_types = text.get("layer_types")
    if layer_types is None:
        pattern = int(text.get("sliding_window_pattern") or 6)
        if pattern <= 0:
            raise ExportError(f"gemma3 sliding_window_pattern must be positive, got {pattern}")
        return ["sliding_attention" if (layer + 1) % pattern else "full_attention" for layer in range(num_layers)]
    if (not isinstance(layer_types, list) or len(layer_types) < num_layers
            or any(kind not in ("sliding_attention", "full_attention") for kind in layer_types)):
        raise ExportError(f"gemma3 layer_types must name sliding_attention or full_attention for each of the "
                          f"{num_layers} layers, got {layer_types}")
    return list(layer_types[:num_layers])


def gemma3_rope(text: dict) -> tuple:
    """(global rope_theta, global rope_scaling or None, local rope theta). Newer configs write rope_parameters
    keyed by layer type ({"full_attention": {...}, "sliding_attention": {...}}); older ones rope_theta,
    rope_scaling (global layers only) and rope_local_base_freq. Local layers are never scaled."""
    from .config import ExportError

    parameters = text.get("rope_parameters")
    if isinstance(parameters, dict) and isinstance(parameters.get("full_attention"), dict):
        full = parameters["full_attention"]
        local = parameters.get("sliding_attention") or {}
        if local.get("rope_type", local.get("type", "default")) != "default":
            raise ExportError(f"gemma3 sliding_attention rope_type '{local.get('rope_type')}' is not supported "
                              "(only default)")
        kind = full.get("rope_type", full.get("type", "default"))
        return (float(full.get("rope_theta", text["rope_theta"])), None if kind == "default" else dict(full),
                float(local.get("rope_theta", text["rope_local_base_freq"])))
    scaling = text.get("rope_scaling")
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type", "default")) == "default":
        scaling = None
    return float(text["rope_theta"]), scaling, float(text["rope_local_base_freq"])


def gemma3_text_tensors(tensors: dict, model_type: str) -> None:
    """A gemma3 checkpoint's text tower under gemma3_text's names (in place): the tower's prefix becomes model.,
    the head (if any) lm_head.weight, and the image side is dropped."""
    if model_type != "gemma3":
        return
    for name in list(tensors):
        tensor = tensors.pop(name)
        if name.startswith(IMAGE_PREFIXES):
            continue
        prefix = next((prefix for prefix in TEXT_TOWER_PREFIXES if name.startswith(prefix)), None)
        if prefix is not None:
            tensors["model." + name[len(prefix):]] = tensor
        elif name in HEAD_NAMES:
            tensors["lm_head.weight"] = tensor
        else:
            tensors[name] = tensor  # left for the common check to name as unexpected


def prepare_gemma3_tensors(tensors: dict, config, dtype: torch.dtype) -> None:
    """Folds (1 + weight) into every norm and sqrt(hidden_size) into the embedding (and, with a tied head, its
    inverse into the final norm), in float32, Hugging Face names, in place; `dtype` is the package's."""
    for name in list(tensors):
        if name.endswith("norm.weight"):
            tensors[name] = 1.0 + tensors[name].to(torch.float32)
    # Hugging Face multiplies by the scale cast to the dtype the model runs in: in bfloat16, sqrt(2560) = 50.596 is
    # 50.5. The package's dtype is that dtype.
    scale = float(torch.tensor(math.sqrt(config.hidden_size), dtype=dtype))
    tensors["model.embed_tokens.weight"] = tensors["model.embed_tokens.weight"].to(torch.float32) * scale
    if config.tie_word_embeddings:
        tensors["model.norm.weight"] = tensors["model.norm.weight"] / scale
