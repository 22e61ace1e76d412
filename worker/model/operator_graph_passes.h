#ifndef LLMC_WORKER_MODEL_OPERATOR_GRAPH_PASSES_H_
#define LLMC_WORKER_MODEL_OPERATOR_GRAPH_PASSES_H_

// Rewrites of a loaded package's graphs for the CPU kernels, run once at load (after the module is frozen, before
// its first step). The package on disk keeps its graphs; only the worker's copy changes, and it computes the same
// bits.
#include <torch/script.h>

#include <cstdint>

namespace llmc::model {

// Every layer reshapes the attention's output [tokens, heads, head_dim] to [-1, attention_width] for o_proj's
// linear_residual, whose CPU kernel takes the three-dimensional output as it lies. Where the reshape's shape is
// that constant and linear_residual is its only use, the reshape goes: two interpreted operators a layer, each
// run with caches the weights have just emptied. Returns how many went.
int DropAttentionOutputReshapes(torch::jit::Module& module, int64_t attention_width);

// How many nodes of `kind` the graph has, in its nested blocks too.
int64_t CountNodes(torch::jit::Graph& graph, c10::Symbol kind);

}  // namespace llmc::model

#endif  // LLMC_WORKER_MODEL_OPERATOR_GRAPH_PASSES_H_
