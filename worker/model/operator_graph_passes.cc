#include "worker/model/operator_graph_passes.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <vector>

namespace llmc::model {
namespace {

using torch::jit::Node;
using torch::jit::Value;

void CollectNodes(torch::jit::Block* block, std::vector<Node*>& nodes) {
  for (Node* node : block->nodes()) {
    nodes.push_back(node);
    for (torch::jit::Block* inner : node->blocks()) CollectNodes(inner, nodes);
  }
}

// The shape operand as constant integers: a constant list, or a list built of constants.
bool ConstantShape(Value* shape, std::vector<int64_t>& sizes) {
  if (const c10::optional<c10::IValue> constant = torch::jit::toIValue(shape)) {
    if (!constant->isIntList()) return false;
    sizes = constant->toIntVector();
    return true;
  }
  if (shape->node()->kind() != c10::prim::ListConstruct) return false;
  for (Value* element : shape->node()->inputs()) {
    const c10::optional<c10::IValue> constant = torch::jit::toIValue(element);
    if (!constant || !constant->isInt()) return false;
    sizes.push_back(constant->toInt());
  }
  return true;
}

}  // namespace

int DropAttentionOutputReshapes(torch::jit::Module& module, int64_t attention_width) {
  static const c10::Symbol kPagedAttention = c10::Symbol::fromQualString("llmc::paged_attention");
  static const c10::Symbol kLinearResidual = c10::Symbol::fromQualString("llmc::linear_residual");
  int dropped = 0;
  for (const torch::jit::Module& part : module.modules()) {
    for (const torch::jit::Method& method : part.get_methods()) {
      std::vector<Node*> nodes;
      CollectNodes(method.graph()->block(), nodes);
      for (Node* reshape : nodes) {
        if (reshape->kind() != c10::aten::reshape || reshape->input(0)->node()->kind() != kPagedAttention) continue;
        const auto& uses = reshape->output()->uses();
        if (uses.size() != 1 || uses[0].user->kind() != kLinearResidual || uses[0].offset != 0) continue;
        std::vector<int64_t> sizes;
        if (!ConstantShape(reshape->input(1), sizes) || sizes != std::vector<int64_t>{-1, attention_width}) continue;
        Node* shape = reshape->input(1)->node();
        reshape->output()->replaceAllUsesWith(reshape->input(0));
        reshape->destroy();
        if (shape->kind() == c10::prim::ListConstruct && !shape->hasUses()) shape->destroy();
        ++dropped;
      }
    }
  }
  return dropped;
}

int64_t CountNodes(torch::jit::Graph& graph, c10::Symbol kind) {
  std::vector<Node*> nodes;
  CollectNodes(graph.block(), nodes);
  return std::count_if(nodes.begin(), nodes.end(), [kind](const Node* node) { return node->kind() == kind; });
}

}  // namespace llmc::model
