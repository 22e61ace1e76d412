"""Granite 3 checkpoints (model_type granite) as the Llama-family network reads them.

Granite is Llama's decoder with four multipliers (configuration_granite.py): the token embeddings are scaled by
embedding_multiplier, each attention output and each MLP output by residual_multiplier before its residual add,
the attention scores by attention_multiplier (instead of head_dim ** -0.5), and the logits are divided by
logits_scaling. The attention scale is the Attention module's scale (an argument paged_attention already takes);
the others are linear and are folded into the weights here, before any quantization, so the graph is a Llama
package's (format version 6):

- residual_multiplier into o_proj and down_proj: x + r * (W a) = x + (r W) a.
- embedding_multiplier into the embedding matrix: E'[t] = m * E[t].
- 1 / logits_scaling into the final norm's weight: logits = (w * n(x)) E^T / s = ((w / s) * n(x)) E^T. With a
  tied head the head is E' = m * E, so the norm's weight also takes 1 / m. The pooled embeddings
  (forward_with_hidden) are that norm's output scaled by a positive constant, which their L2 normalization
  cancels.
"""
import torch

from .config import ModelConfig


def prepare_granite_tensors(tensors: dict, config: ModelConfig) -> None:
    """Folds a Granite checkpoint's embedding, residual and logit multipliers into its tensors (Hugging Face
    names, in place), computed in float32."""
    def scaled(name: str, factor: float) -> None:
        tensors[name] = tensors[name].to(torch.float32) * factor

    for layer in range(config.num_layers):
        prefix = f"model.layers.{layer}."
        scaled(prefix + "self_attn.o_proj.weight", config.residual_multiplier)
        scaled(prefix + "mlp.down_proj.weight", config.residual_multiplier)
    scaled("model.embed_tokens.weight", config.embedding_multiplier)
    head_factor = config.embedding_multiplier if config.tie_word_embeddings else 1.0
    scaled("model.norm.weight", 1.0 / (config.logits_scaling * head_factor))
