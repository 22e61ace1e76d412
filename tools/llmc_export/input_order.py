"""Activation-order 4-bit weights (GPTQ desc_act, compressed-tensors actorder "group") in an int4 package.

Such a checkpoint quantizes each projection's inputs in an order of its own and forms groups along that order,
so a group's inputs are scattered over the row (g_idx names each input's group). take_int4_weights sorts each
weight's inputs by group, which makes every group a run of group-size inputs again; the matrix then expects its
input in the same order, x[order], and this module arranges that without changing any nibble, scale or zero point:

- down_proj: the order moves into the rows of gate_up_proj (gate's and up's rows alike), so the activation comes
  out of the feed-forward block already in down_proj's order and nothing is gathered while serving;
- qkv_proj and gate_up_proj: the network gathers the hidden state into the order before the fused RMSNorm
  (index_select on an input_order buffer, model.py), and the norm's weights are stored in that order too, since
  x * rsqrt(mean(x^2)) * w is the same computation on any order of the inputs;
- o_proj: the network gathers the attention's output into the order.

q, k and v read one input, as gate and up do: their stacked matrix needs one order, which GPTQ gives them (one
Hessian per input). A checkpoint whose stacked parts disagree, or whose LM head has an order, is refused by name.
"""
from typing import Dict, Tuple

import torch

from .config import ExportError
from .model import CausalLM
from .prequantized import stacked_parts

# Module (under model.layers.N) whose input the network gathers, and the norm whose weights follow the order.
GATHERED = {"self_attn.qkv_proj": "input_layernorm", "mlp.gate_up_proj": "post_attention_layernorm",
            "self_attn.o_proj": None}


def _module_orders(orders: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """{weight name (Hugging Face's): order} -> {module name (model.py's): order}, stacked parts checked alike."""
    by_module = {}
    for name in sorted(orders):
        target, parts = stacked_parts(name)
        if parts is None:
            by_module[target] = orders[name]
            continue
        first = orders.get(parts[0])
        if any(part not in orders or not torch.equal(orders[part], first) for part in parts):
            raise ExportError(f"{', '.join(parts)} read one input but the checkpoint orders it differently for them "
                              "(act-order g_idx); llmc stacks them into one matrix, which needs one order")
        by_module[target] = first
    return by_module


def _permute_rows(weight: Tuple[torch.Tensor, torch.Tensor], rows: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    packed, scales = weight
    return packed[rows].contiguous(), scales[rows].contiguous()


def apply_input_orders(model: CausalLM, exact: Dict[str, tuple], orders: Dict[str, torch.Tensor]) -> None:
    """Places the act-order weights' input orders (take_int4_weights' input_orders) in `model` and `exact`
    (by_module's {module name: (packed, scales)}), as the module docstring says."""
    layers = model.model.layers
    for module, order in _module_orders(orders).items():
        prefix, _, index_and_name = module.partition("model.layers.")
        index, _, name = index_and_name.partition(".")
        known = name in GATHERED or name == "mlp.down_proj"
        if prefix or not index.isdigit() or int(index) >= len(layers) or not known:
            raise ExportError(f"{module} has act-order groups (g_idx), which llmc supports for the layers' "
                              "projections only")
        layer = layers[int(index)]
        if hasattr(layer, "pre_feedforward_layernorm"):
            raise ExportError(f"{module}: act-order groups with sandwich norms are not supported")
        order = order.long()
        if name == "mlp.down_proj":
            gate_up = f"model.layers.{index}.mlp.gate_up_proj"
            if gate_up not in exact:
                raise ExportError(f"{module} has act-order groups, which need {gate_up} quantized too")
            intermediate = exact[gate_up][0].shape[0] // 2
            exact[gate_up] = _permute_rows(exact[gate_up], torch.cat([order, intermediate + order]))
            continue
        target = layer.get_submodule(name)
        target.register_buffer("input_order", order.contiguous())
        norm = GATHERED[name]
        if norm is not None:
            weight = getattr(layer, norm).weight
            with torch.no_grad():
                weight.copy_(weight[order])
