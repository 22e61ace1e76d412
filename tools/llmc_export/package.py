"""Writes an llmc model package: model.pt (TorchScript), tokenizer.json and the llmc-model.json manifest."""
import json
import os
import shutil
from typing import Optional

import torch
from torch import nn

from .config import ExportError, ModelConfig
from .model import CausalLM, hf_parameter_shapes, load_hf_tensors, random_weights
from .gemma3 import gemma3_text_tensors, prepare_gemma3_tensors
from .granite import prepare_granite_tensors
from .gpt_oss import prepare_gpt_oss_tensors
from .moe import rename_mixtral_tensors
from .phi3 import prepare_phi3_tensors
from .output_formats import detect_output_formats, read_output_formats, resolve_output_formats
from .prequantized import by_module, take_int8_weights
from .input_order import apply_input_orders
from .prequantized_int4 import Gptq8Scheme, Int4Scheme, take_quantized_weights
from .ops import MXFP4_GROUP_SIZE
from .quantize import (INT4_DEFAULT_GROUP_SIZE, check_group_size, check_int4_group_size, is_expert_projection,
                       quantize_experts_mxfp4, quantize_int4, quantize_int8, quantize_model, quantize_mxfp4)
from .safetensors import read_checkpoint

FORMAT = "llmc-model"
# The version of packages without QK-norm (what scripts/package-is-current.sh expects of the packages they make).
FORMAT_VERSION = 6
# Version 7 passes rms_norm_qkv_rope the per-head q/k norm weights (Qwen3's QK-norm). Only packages that use them
# are written as version 7, so a worker that reads version 6 keeps serving every other package and refuses a
# QK-norm one by its version instead of failing on the operator's arguments.
QK_NORM_FORMAT_VERSION = 7
# Version 8 passes paged_attention a window (per-layer attention windows: Mistral's and Qwen2's sliding windows).
# Only packages with a windowed layer are written as version 8, so an older worker refuses them by their version
# instead of failing on the operator's argument (or, worse, attending past the window).
WINDOW_FORMAT_VERSION = 8
# Version 9: int4 weights (quantization "int4", two 4-bit weights a byte). Only int4 packages are written as
# version 9, so an older worker refuses them by their version.
INT4_FORMAT_VERSION = 9
# Version 10: Gemma 3's graph (linear_residual with an output norm, rms_norm_gate_up_gelu_tanh, two rotations,
# soft-capped logits). Only packages that use them are written as version 10.
GEMMA3_FORMAT_VERSION = 10
# Version 11: int4 weights with zero points (weight_scale [N, G, 2]: scale and zero point per group). Only
# packages that have them are written as version 11; symmetric int4 packages stay version 9 (or 10).
INT4_ZERO_POINT_FORMAT_VERSION = 11
# Version 12: mixtures of experts (moe_rms_norm_swiglu, the manifest's moe fields). Only packages with sparse
# layers are written as version 12.
MOE_FORMAT_VERSION = 12
# Version 13: MXFP4 experts (quantization "mxfp4": uint8 E2M1 codes with uint8 E8M0 exponents, every other weight
# in the package dtype). Only mxfp4 packages are written as version 13.
MXFP4_FORMAT_VERSION = 13
MANIFEST = "llmc-model.json"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
QUANTIZATIONS = ("none", "int8", "int4", "mxfp4")
# How the worker serves an int8 package unless told (the manifest's served_quantization; int8 is the default).
SERVED_QUANTIZATIONS = ("int8", "w8a16", "w8a8")
# How an embedding request pools the final normalized hidden states of its prompt (then L2-normalized);
# "none": the package serves no embeddings.
EMBEDDING_POOLINGS = ("last", "mean", "none")


def default_chat_template(config: ModelConfig) -> str:
    if config.architecture in ("qwen2", "qwen3", "smollm3", "qwen3_moe"):  # SmolLM3 chats in ChatML too
        return "chatml"
    if config.architecture in ("mistral", "mixtral"):
        return "mistral"
    # No built-in Phi, Granite, Gemma or GPT-OSS template: the checkpoint's own Jinja one serves chats (for GPT-OSS
    # without one, llmc's harmony template: fallback_jinja_template).
    if config.architecture in ("phi3", "granite", "gemma3", "gpt_oss"):
        return "raw"
    return "llama3" if config.vocab_size >= 128000 else "llama2"


def manifest_for(config: ModelConfig, name: str, dtype: str, chat_template: str, quantization: str = "none",
                 group_size: int = 0, embedding_pooling: str = "last", served_quantization: str = "int8",
                 zero_points: bool = False) -> dict:
    version = format_version(config)
    if quantization == "int4":
        version = max(version, INT4_ZERO_POINT_FORMAT_VERSION if zero_points else INT4_FORMAT_VERSION)
    if quantization == "mxfp4":
        version = max(version, MXFP4_FORMAT_VERSION)
    return {
        "format": FORMAT,
        "format_version": version,
        "name": name,
        "architecture": config.architecture,
        "dtype": dtype,
        "quantization": quantization,
        "quantization_group_size": group_size,
        **({"served_quantization": served_quantization} if served_quantization != "int8" else {}),
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_layers": config.num_layers,
        "num_heads": config.num_heads,
        "num_kv_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "max_context_length": config.max_context_length,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "tie_word_embeddings": config.tie_word_embeddings,
        "bos_token_id": config.bos_token_id,
        "eos_token_ids": list(config.eos_token_ids),
        "chat_template": chat_template,
        "embedding_pooling": embedding_pooling,
        **({"sliding_window": config.sliding_window} if config.sliding_window else {}),
        **({"layer_windows": list(config.layer_windows)} if any(config.layer_windows) else {}),
        **({"moe_layers": list(config.moe_layers), "num_experts": config.num_experts,
            "experts_per_token": config.experts_per_token, "moe_intermediate_size": config.moe_intermediate_size,
            "normalize_top_k": config.normalize_top_k, "moe_variant": config.moe_variant}
           if config.moe_layers else {}),
        **({"context_note": longrope_context_note(config)} if config.longrope_maximum else {}),
    }


def format_version(config: ModelConfig) -> int:
    """The oldest format that has what the package's graph calls."""
    if config.moe_layers:
        return MOE_FORMAT_VERSION
    if (config.sandwich_norms or config.hidden_activation != "silu" or config.local_rope_layers
            or config.final_logit_softcapping > 0):
        return GEMMA3_FORMAT_VERSION
    if any(config.layer_windows):
        return WINDOW_FORMAT_VERSION
    return QK_NORM_FORMAT_VERSION if config.qk_norm else FORMAT_VERSION


def check_mxfp4_fits(config: ModelConfig, group_size: int = 0) -> None:
    if not config.moe_layers:
        raise ExportError(f"mxfp4 quantizes a mixture of experts' experts, and this {config.architecture} model has "
                          "none: use --quantize int8 or int4")
    if group_size not in (0, MXFP4_GROUP_SIZE):
        raise ExportError(f"mxfp4 has blocks of {MXFP4_GROUP_SIZE} inputs, not {group_size}: leave --group-size out")


def longrope_context_note(config: ModelConfig) -> str:
    """What a LongRoPE package's manifest says of its factor list (ModelConfig.serve_long_rope_factors)."""
    if config.longrope_factors == "long":
        return ("LongRoPE served with its long factors at every position (--rope-factors long): exact for sequences "
                "longer than original_max_position_embeddings")
    return ("LongRoPE served with its short factors only: max_context_length capped at "
            "original_max_position_embeddings (export with --rope-factors long for the whole context)")


CHAT_TEMPLATE_FILE = "chat_template.jinja"
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")
# llmc's own Jinja templates, beside this module.
TEMPLATES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
HARMONY_TEMPLATE = os.path.join(TEMPLATES_DIR, "harmony.jinja")


def harmony_chat_template() -> str:
    """llmc's chat template for OpenAI's harmony format (GPT-OSS), as its text."""
    with open(HARMONY_TEMPLATE, encoding="utf-8") as f:
        return f.read()


def fallback_jinja_template(config: ModelConfig) -> Optional[str]:
    """The Jinja template a package gets when its tokenizer files bring none: harmony for GPT-OSS (whose
    tokenizer packages often lack the template), None for the rest (they fall back to a built-in one)."""
    if config.architecture == "gpt_oss":
        return harmony_chat_template()
    return None


def read_tokenizer_config(tokenizer_path: str) -> tuple:
    """The Jinja chat template and special tokens from the tokenizer_config.json (and chat_template.jinja)
    beside tokenizer.json: (template or None, {name: token})."""
    folder = os.path.dirname(os.path.abspath(tokenizer_path))
    config = {}
    config_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one is the chat template
        template = next((entry.get("template") for entry in template if entry.get("name") == "default"), None)
    jinja_path = os.path.join(folder, CHAT_TEMPLATE_FILE)
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8") as f:
            template = f.read()
    special_tokens = {}
    for key in SPECIAL_TOKEN_KEYS:
        token = config.get(key)
        if isinstance(token, dict):  # older files spell an AddedToken
            token = token.get("content")
        if isinstance(token, str):
            special_tokens[key] = token
    return (template if isinstance(template, str) and template else None), special_tokens


def build_model(config: ModelConfig, checkpoint: str = None, seed: int = 0) -> CausalLM:
    """The network with weights from an unquantized checkpoint folder, or random ones from `seed`."""
    if checkpoint is None:
        model = CausalLM(config)
        random_weights(model, seed)
        return model
    return load_checkpoint(config, checkpoint, None)[0]


def build_random_quantized_moe(config: ModelConfig, seed: int, dtype: str, method: str, group_size: int) -> CausalLM:
    """A random mixture of experts whose experts are made quantized one at a time, so that the float matrices of
    all experts never exist at once (a Qwen3-30B-A3B shape holds 116 GB of them in float32): each expert's
    matrices are drawn (N(0, 0.02), their own seed), rounded to `dtype` and quantized (method int8, int4 or mxfp4,
    which has no group size to choose) before the next is drawn. The other weights are random_weights' (the
    experts' draws left out, so the figures differ from build_model's)."""
    _return_large_blocks_to_the_system()
    model = CausalLM(config, initialize_experts=False)
    random_weights(model, seed, skip_experts=True)
    with torch.no_grad():  # the other weights in `dtype` now, before the experts become resident
        for name, parameter in model.named_parameters():
            if not (".experts." in name and name.endswith("proj.weight")):
                parameter.data = parameter.data.to(DTYPES[dtype])
    fill_experts_quantized(model, seed, DTYPES[dtype], method, group_size)
    return model


def _return_large_blocks_to_the_system() -> None:
    """glibc's malloc raises its mmap threshold after the first large free, so each expert's float draw would then
    come from the heap, where the quantized matrices allocated between the draws pin the freed space: thousands of
    experts left the heap holding one float draw per expert (the first 48-layer export was killed for memory).
    A fixed threshold of 1 MiB keeps every large block in its own mapping, returned on free."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def fill_experts_quantized(model: CausalLM, seed: int, dtype: torch.dtype, method: str, group_size: int) -> None:
    index = 0
    with torch.no_grad():
        for name, module in model.named_modules():
            if not is_expert_projection(name):
                continue
            generator = torch.Generator().manual_seed(seed * 1_000_003 + index)
            index += 1
            weight = (torch.randn(module.weight.shape, generator=generator) * 0.02).to(dtype)
            if method == "mxfp4":
                q, scale = quantize_mxfp4(weight, name + ".weight")
            elif method == "int4":
                q, scale = quantize_int4(weight, group_size, name + ".weight")
            else:
                q, scale = quantize_int8(weight, group_size, name + ".weight")
            module.weight = nn.Parameter(q, requires_grad=False)
            module.weight_scale = scale


def load_checkpoint(config: ModelConfig, checkpoint: str, scheme, dtype: str = "float32",
                    keep_mxfp4: bool = False) -> tuple:
    """(the network with a checkpoint folder's weights, {module name: (int8, scales)} for the projections an
    int8 checkpoint (scheme, prequantized.py) or a 4-bit one (an Int4Scheme, prequantized_int4.py) holds quantized:
    quantize_model's `exact`). `dtype` is the package's
    (Gemma 3 rounds a factor to it). keep_mxfp4 (an mxfp4 package of a GPT-OSS MXFP4 checkpoint): the experts keep
    the checkpoint's codes and exponents, their float matrices allocated but never written."""
    model = CausalLM(config, initialize_experts=not keep_mxfp4)
    tensors = read_checkpoint(checkpoint)
    if config.architecture == "mixtral":
        rename_mixtral_tensors(tensors)
    kept = {}
    if config.architecture == "gpt_oss":
        kept = prepare_gpt_oss_tensors(tensors, config, keep_mxfp4)
    if config.moe_layers and scheme is not None:
        raise ExportError(f"{config.architecture} quantized checkpoints are not supported yet: export the float "
                          "checkpoint with --quantize int8 or int4 instead")
    if config.architecture == "gemma3":
        if scheme is not None:
            raise ExportError("gemma3 int8 (compressed-tensors) checkpoints are not supported: export the float "
                              "checkpoint with --quantize int8 instead")
        gemma3_text_tensors(tensors, config.source_model_type)
    gptq_like = isinstance(scheme, (Int4Scheme, Gptq8Scheme))
    input_orders = {}
    if gptq_like:
        exact = take_quantized_weights(tensors, scheme, input_orders)
    else:
        exact = take_int8_weights(tensors, scheme) if scheme is not None else {}
    if config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)
        input_orders.pop("lm_head.weight", None)  # by_module leaves a tied checkpoint's LM head out
    if config.architecture == "phi3":
        if scheme is not None:
            raise ExportError("phi3 int8 (compressed-tensors) checkpoints are not supported: export the float "
                              "checkpoint with --quantize int8 instead")
        prepare_phi3_tensors(tensors, config)
    if config.architecture == "granite" and scheme is not None:
        raise ExportError("granite int8 (compressed-tensors) checkpoints are not supported (the residual multiplier "
                          "is folded into o_proj and down_proj): export the float checkpoint with --quantize int8")
    expected = hf_parameter_shapes(config)
    if kept:
        place_mxfp4_experts(model, kept, expected)
    if gptq_like:
        # Older GPTQ tools save a bias of zeros beside every quantized projection: one the architecture lacks goes.
        for name in [name for name in tensors if name.endswith(".bias") and name not in expected
                     and name[:-len(".bias")] + ".weight" in exact]:
            if not bool(tensors[name].any()):
                del tensors[name]
    missing = sorted(name for name in expected if name not in tensors)
    if missing:
        raise ExportError(f"checkpoint is missing tensors: {', '.join(missing[:8])}"
                          + (f" and {len(missing) - 8} more" if len(missing) > 8 else ""))
    integers = sorted(name for name in expected if not tensors[name].is_floating_point())
    if integers:
        raise ExportError(f"checkpoint tensors {', '.join(integers[:4])} are {tensors[integers[0]].dtype} without "
                          "a quantization scale (an int8 checkpoint needs quantization_config and *.weight_scale)")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != tuple(shape):
            raise ExportError(f"tensor {name} has shape {tuple(tensors[name].shape)}, config implies {tuple(shape)}")
    unexpected = sorted(name for name in tensors if name not in expected and not name.endswith("rotary_emb.inv_freq"))
    if unexpected:
        raise ExportError(f"checkpoint has tensors this architecture does not use: {', '.join(unexpected[:8])}")
    if config.architecture == "granite":
        prepare_granite_tensors(tensors, config)
    if config.architecture == "gemma3":
        prepare_gemma3_tensors(tensors, config, DTYPES.get(dtype, torch.float32))
    load_hf_tensors(model, config, tensors)
    modules = by_module(exact, config.tie_word_embeddings, "int4" if isinstance(scheme, Int4Scheme) else "int8")
    apply_input_orders(model, modules, input_orders)
    return model, modules


def place_mxfp4_experts(model: CausalLM, kept: dict, expected: dict) -> None:
    """Makes the kept experts' modules MXFP4 ({module name: (codes, exponents)}, prepare_gpt_oss_tensors) and
    takes their split Hugging Face matrices out of `expected`."""
    modules = dict(model.named_modules())
    for name, (codes, exponents) in kept.items():
        if name not in modules:
            raise ExportError(f"checkpoint has MXFP4 weights for {name}, which this model does not have")
        module = modules[name]
        rows, columns = module.weight.shape
        if tuple(codes.shape) != (rows, columns // 2) or tuple(exponents.shape) != (rows, columns // MXFP4_GROUP_SIZE):
            raise ExportError(f"{name}: MXFP4 codes {tuple(codes.shape)} with exponents {tuple(exponents.shape)} do "
                              f"not fit a {(rows, columns)} matrix")
        module.weight = nn.Parameter(codes, requires_grad=False)
        module.weight_scale = exponents
        parts = ("gate_proj", "up_proj") if name.endswith(".gate_up_proj") else ("down_proj",)
        for part in parts:
            del expected[name.rsplit(".", 1)[0] + "." + part + ".weight"]


def write_package(model: CausalLM, config: ModelConfig, out_dir: str, name: str, dtype: str,
                  tokenizer_path: str, chat_template: str = None, quantize: str = None, group_size: int = 0,
                  embedding_pooling: str = "last", exact: Optional[dict] = None,
                  served_quantization: str = "int8", tool_call_format: Optional[str] = None,
                  reasoning_markers: Optional[str] = None, int4_zero_point: bool = False) -> str:
    """Writes the package; quantize="int8" stores the projection weights as int8 with float32 scales per
    output row (group_size 0) or per group_size input columns, and the activations stay in dtype; "mxfp4" only
    a mixture of experts' experts (those not MXFP4 already), in blocks of 32; `exact`
    (load_checkpoint) gives modules their int8 weights as an int8 checkpoint has them, and served_quantization
    ("w8a16" for a W8A16 checkpoint) how the worker serves them unless told. The manifest's tool_call_format
    and reasoning markers are detected from the tokenizer files beside tokenizer.json (output_formats.py)
    unless tool_call_format / reasoning_markers name them ("auto" or None: detect). The model is converted (and
    quantized) in place."""
    quantization = quantize or "none"
    if dtype not in DTYPES:
        raise ExportError(f"unsupported dtype '{dtype}' (supported: {', '.join(DTYPES)})")
    if quantization not in QUANTIZATIONS:
        raise ExportError(f"unsupported quantization '{quantization}' (supported: {', '.join(QUANTIZATIONS)})")
    if quantization == "int4":
        group_size = group_size or INT4_DEFAULT_GROUP_SIZE
        check_int4_group_size(group_size)
        if served_quantization != "int8":
            raise ExportError(f"served quantization '{served_quantization}' needs int8 weights, not int4")
    elif quantization == "mxfp4":
        check_mxfp4_fits(config, group_size)
        group_size = MXFP4_GROUP_SIZE
        if exact:
            raise ExportError("the checkpoint's weights are int8 or int4: mxfp4 from them is not supported")
    else:
        check_group_size(group_size)
    if embedding_pooling not in EMBEDDING_POOLINGS:
        raise ExportError(f"unsupported embedding pooling '{embedding_pooling}' "
                          f"(supported: {', '.join(EMBEDDING_POOLINGS)})")
    if quantization == "none" and group_size != 0:
        raise ExportError("a quantization group size needs --quantize int8")
    if quantization == "none" and exact:
        raise ExportError("the checkpoint's weights are int8: the package must be int8 too")
    if served_quantization not in SERVED_QUANTIZATIONS or (quantization in ("none", "mxfp4")
                                                          and served_quantization != "int8"):
        raise ExportError(f"served quantization '{served_quantization}' needs int8 weights and is one of "
                          f"{', '.join(SERVED_QUANTIZATIONS)}")
    if tokenizer_path is None or not os.path.exists(tokenizer_path):
        raise ExportError(f"tokenizer.json not found at {tokenizer_path}")
    # The model's own template comes with it, unless a built-in one was asked for by name; without one, llmc's
    # own for the architecture, if it has one (harmony for GPT-OSS), whose formats are then the package's.
    jinja_template, special_tokens = read_tokenizer_config(tokenizer_path)
    detected = read_output_formats(tokenizer_path)
    if jinja_template is None and chat_template is None:
        jinja_template = fallback_jinja_template(config)
        if jinja_template is not None:
            detected = detect_output_formats(jinja_template)
    # Before any file is written, so that a bad override leaves nothing behind.
    output_formats = resolve_output_formats(detected, tool_call_format, reasoning_markers)
    model = model.to(DTYPES[dtype]).eval()
    # Rotary angles and weight scales stay in float32 whatever the weights' dtype (MXFP4 exponents stay uint8).
    model.inv_freq = model.inv_freq.float()
    model.local_inv_freq = model.local_inv_freq.float()
    mxfp4_experts = False
    for module in model.modules():
        if hasattr(module, "weight_scale"):
            if module.weight_scale.dtype == torch.uint8:
                mxfp4_experts = True
            else:
                module.weight_scale = module.weight_scale.float()
    if mxfp4_experts and quantization != "mxfp4":
        raise ExportError(f"the model's experts are MXFP4: its package is mxfp4, not {quantization}")
    if quantization in ("int8", "int4"):
        # From the weights in the package dtype: what the worker gets quantizing a package of that dtype at load.
        quantize_model(model, group_size, exact, method=quantization, zero_point=int4_zero_point)
    if quantization == "mxfp4":
        quantize_experts_mxfp4(model)  # from the package dtype too
    zero_points = any(getattr(module, "weight_scale", torch.empty(0)).dim() == 3 for module in model.modules())
    for module in model.modules():  # the experts' tensors may have been replaced since the lists were made
        if hasattr(module, "refresh_expert_lists"):
            module.refresh_expert_lists()
    scripted = torch.jit.script(model)
    os.makedirs(out_dir, exist_ok=True)
    scripted.save(os.path.join(out_dir, "model.pt"))
    shutil.copyfile(tokenizer_path, os.path.join(out_dir, "tokenizer.json"))
    manifest = manifest_for(config, name, dtype, chat_template or default_chat_template(config), quantization,
                            group_size, embedding_pooling, served_quantization, zero_points)
    if special_tokens:
        manifest["special_tokens"] = special_tokens
    manifest.update(output_formats.manifest_fields())
    template_path = os.path.join(out_dir, CHAT_TEMPLATE_FILE)
    if jinja_template is not None and chat_template is None:
        with open(template_path, "w", encoding="utf-8") as f:
            f.write(jinja_template)
        manifest["chat_template_file"] = CHAT_TEMPLATE_FILE
    elif os.path.exists(template_path):
        os.remove(template_path)
    with open(os.path.join(out_dir, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return out_dir
