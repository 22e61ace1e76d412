"""Architecture sizes of a Llama-family model (Llama, Mistral, Qwen2, Qwen3), read from a Hugging Face
config.json or given directly."""
import dataclasses
import json
import math
from typing import Optional

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


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


def check_qwen3(hf: dict) -> None:
    """What a Qwen3 config may ask for that this llmc does not serve, refused by name: sliding-window layers
    (use_sliding_window, or a sliding_attention entry in layer_types; Qwen3 dense checkpoints attend to the whole
    context) and attention_bias, which in Qwen3 also gives o_proj a bias."""
    if hf.get("attention_bias"):
        raise ExportError("qwen3 with attention_bias: true is not supported (its o_proj bias has no operand here)")
    if hf.get("use_sliding_window"):
        raise ExportError("qwen3 with use_sliding_window: true is not supported (per-layer attention windows are "
                          "not served yet); set it to false to export the model with full attention in every layer")
    layer_types = hf.get("layer_types") or []
    if not isinstance(layer_types, list) or any(kind != "full_attention" for kind in layer_types):
        raise ExportError(f"qwen3 layer_types other than full_attention are not supported: {layer_types}")


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
    # Mistral's attention window; 0: none. The engine attends to the whole context, so a package with a
    # window serves at most that many tokens (max_context_length is capped to it) rather than answer wrong.
    sliding_window: int = 0
    # Qwen3's QK-norm: an RMSNorm (weights of size head_dim, the layer's rms_norm_eps) on each head of q and k
    # after the projection and before RoPE.
    qk_norm: bool = False

    def validate(self):
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                     "head_dim", "max_context_length"):
            if getattr(self, name) <= 0:
                raise ExportError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads != 0:
            raise ExportError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.head_dim % 2 != 0:
            raise ExportError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if self.rope_scaling is not None:
            kind = self.rope_scaling.get("rope_type", self.rope_scaling.get("type"))
            if kind not in ("linear", "llama3", "default"):
                raise ExportError(f"unsupported rope_scaling type '{kind}' (supported: linear, llama3)")
        return self

    def inverse_frequencies(self):
        """RoPE inverse frequencies with the configured scaling applied."""
        inv_freq = [1.0 / (self.rope_theta ** (i / self.head_dim)) for i in range(0, self.head_dim, 2)]
        scaling = self.rope_scaling or {}
        kind = scaling.get("rope_type", scaling.get("type", "default"))
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
        return inv_freq

    @staticmethod
    def from_hf_config(path):
        return ModelConfig.from_hf_config_dict(read_hf_config(path))

    @staticmethod
    def from_hf_config_dict(hf):
        model_type = hf.get("model_type", "")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ExportError(f"unsupported architecture '{model_type}' (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
        if model_type == "qwen3":
            check_qwen3(hf)
        try:
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
                rope_theta=float(hf.get("rope_theta", 10000.0)),
                rope_scaling=hf.get("rope_scaling"),
                qkv_bias=model_type == "qwen2" or bool(hf.get("attention_bias", False)),
                qk_norm=model_type == "qwen3",
                tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
                max_context_length=int(hf.get("max_position_embeddings", 4096)),
                bos_token_id=hf.get("bos_token_id"),
                eos_token_ids=tuple(eos if isinstance(eos, list) else [eos] if eos is not None else []),
                # Qwen3 ignores sliding_window unless use_sliding_window (refused above), as Hugging Face does.
                sliding_window=0 if model_type == "qwen3" else int(hf.get("sliding_window") or 0),
            )
            if 0 < config.sliding_window < config.max_context_length:
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
