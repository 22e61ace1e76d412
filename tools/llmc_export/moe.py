"""Mixtures of experts (Qwen3-MoE, Mixtral): which layers route, and the checkpoint names of their experts.

A sparse layer's MLP is a router (`mlp.gate`, a [num_experts, hidden] matrix without bias) and num_experts SwiGLU
experts of moe_intermediate_size. For each token the router's logits go through a float32 softmax; the
experts_per_token largest probabilities choose the experts (equal ones: the lower expert index first), renormalized
to sum 1 when normalize_top_k, and the token's output is the sum of the chosen experts' outputs times their
probabilities (cast to the activations' dtype). Qwen3-MoE renormalizes when the config's norm_topk_prob says so,
Mixtral always.

Qwen3-MoE's layer i is sparse unless mlp_only_layers lists it, and only when (i + 1) % decoder_sparse_step == 0;
its other layers are dense MLPs of intermediate_size. Every Mixtral layer is sparse, its experts of
intermediate_size.
"""
import re

MOE_MODEL_TYPES = ("qwen3_moe", "mixtral")
# Hugging Face's Qwen3MoeConfig defaults where config.json leaves a key out.
QWEN3_MOE_DEFAULTS = {"decoder_sparse_step": 1, "norm_topk_prob": False, "mlp_only_layers": []}
# A router of more experts than this, or more chosen per token, is refused: the kernels keep per-token choices on
# the stack.
MAX_EXPERTS = 512
MAX_EXPERTS_PER_TOKEN = 32


def _positive_int(hf: dict, key: str, model_type: str) -> int:
    from .config import ExportError  # config.py imports this module
    value = hf.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ExportError(f"{model_type} {key} must be a positive integer, got {value!r}")
    return value


def moe_settings(hf: dict, model_type: str, num_layers: int) -> dict:
    """The ModelConfig fields of a mixture-of-experts config (moe_layers, num_experts, experts_per_token,
    moe_intermediate_size, normalize_top_k), as Hugging Face reads it; what it cannot serve is refused by name."""
    from .config import ExportError  # config.py imports this module
    if hf.get("hidden_act", "silu") != "silu":
        raise ExportError(f"{model_type} with hidden_act '{hf.get('hidden_act')}' is not supported (only silu)")
    if model_type == "mixtral":
        experts = _positive_int(hf, "num_local_experts", model_type)
        per_token = _positive_int(hf, "num_experts_per_tok", model_type)
        layers = tuple(range(num_layers))
        intermediate = _positive_int(hf, "intermediate_size", model_type)
        normalize = True
    else:
        experts = _positive_int(hf, "num_experts", model_type)
        per_token = _positive_int(hf, "num_experts_per_tok", model_type)
        intermediate = _positive_int(hf, "moe_intermediate_size", model_type)
        step = hf.get("decoder_sparse_step", QWEN3_MOE_DEFAULTS["decoder_sparse_step"])
        if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
            raise ExportError(f"{model_type} decoder_sparse_step must be a positive integer, got {step!r}")
        dense = hf.get("mlp_only_layers") or []
        if not isinstance(dense, list) or any(not isinstance(layer, int) or isinstance(layer, bool) for layer in dense):
            raise ExportError(f"{model_type} mlp_only_layers must list layer indices, got {dense!r}")
        layers = tuple(layer for layer in range(num_layers) if layer not in dense and (layer + 1) % step == 0)
        normalize = bool(hf.get("norm_topk_prob", QWEN3_MOE_DEFAULTS["norm_topk_prob"]))
        if hf.get("shared_expert_intermediate_size"):
            raise ExportError(f"{model_type} with a shared expert is not supported (Qwen3-MoE has none)")
    if experts > MAX_EXPERTS:
        raise ExportError(f"{model_type} with {experts} experts is not supported (at most {MAX_EXPERTS})")
    if per_token > min(experts, MAX_EXPERTS_PER_TOKEN):
        raise ExportError(f"{model_type} num_experts_per_tok {per_token} must be at most the number of experts "
                          f"({experts}) and {MAX_EXPERTS_PER_TOKEN}")
    return {"moe_layers": layers, "num_experts": experts, "experts_per_token": per_token,
            "moe_intermediate_size": intermediate, "normalize_top_k": normalize}


# Mixtral's checkpoint names of its sparse block and experts, and the names this network gives them (Qwen3-MoE's).
_MIXTRAL_RENAMES = ((re.compile(r"\.block_sparse_moe\."), ".mlp."),
                    (re.compile(r"\.experts\.(\d+)\.w1\."), r".experts.\1.gate_proj."),
                    (re.compile(r"\.experts\.(\d+)\.w3\."), r".experts.\1.up_proj."),
                    (re.compile(r"\.experts\.(\d+)\.w2\."), r".experts.\1.down_proj."))


def rename_mixtral_tensors(tensors: dict) -> None:
    """Renames a Mixtral checkpoint's sparse-block tensors in place to the Qwen3-MoE names the network uses:
    block_sparse_moe -> mlp, experts.e.w1 (gate) -> gate_proj, w3 (up) -> up_proj, w2 (down) -> down_proj."""
    for name in list(tensors):
        renamed = name
        for pattern, replacement in _MIXTRAL_RENAMES:
            renamed = pattern.sub(replacement, renamed)
        if renamed != name:
            tensors[renamed] = tensors.pop(name)
