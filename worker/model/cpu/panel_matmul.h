#ifndef LLMC_WORKER_MODEL_CPU_PANEL_MATMUL_H_
#define LLMC_WORKER_MODEL_CPU_PANEL_MATMUL_H_

// What every fused operator (fused_ops_cpu.cc) does before its own epilogue: stage the batch's activations
// once (normalised, converted or quantized for int8 weights, zero-padded), then let the members of the thread
// team (thread_team.h) claim runs of the weight's panels and multiply each by the staged rows with the kernel
// the CPU and the batch call for (panel_kernels.h), handing every block of results to the operator.
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "worker/model/cpu/panel_kernels.h"
#include "worker/model/cpu/read_ahead.h"
#include "worker/model/cpu/thread_team.h"

namespace llmc::model::cpu {

// Buffers of the calling thread (the engine thread), grown when a larger batch arrives and kept: steady
// state allocates nothing. Grown only outside parallel regions.
enum CallerBufferSlot {
  kStagedActivations = 0,
  kQkvResults = 1,
  kTopLogitLists = 2,
  kMergeCursors = 3,
  kActivationScales = 4,
  kActivationBytes = 5,
  kActivationOffsets = 6,
  kActivationGroupSums = 7,
  kMoeNormalizedRows = 8,
  kMoeRouterLogits = 9,
  kMoeActivatedRows = 10,
  kMoeEntryOutputs = 11,
  kCallerBufferSlots
};

// The calling thread's buffer for `slot`, at least `bytes` long. Left uninitialised (every operator writes
// what it reads): the engine reserves them for its largest step at start-up, and only the pages steps
// actually use become resident.
char* CallerBuffer(CallerBufferSlot slot, size_t bytes);

// A projection's packed weight and, for int8 and int4 weights, its packed scales [panels, weight_groups,
// kPanelWidth]. An int4 weight with zero points passes [2, panels, weight_groups, kPanelWidth] (int4_weight.h:
// the scales, then 8 - z), split here.
struct PanelWeight {
  PanelWeight(const at::Tensor& weight, const at::Tensor& weight_scale);
  at::Tensor packed;
  at::Tensor scales;
  at::Tensor zero_offsets;  // int4 with zero points: 8 - z per column and group, as the scales; else undefined
  bool int8() const { return packed.scalar_type() == at::kChar; }
  bool int4() const { return packed.scalar_type() == at::kByte; }
  // int4's panels with E8M0 exponents as the scales (mxfp4_weight.h).
  bool mxfp4() const { return int4() && scales.defined() && scales.scalar_type() == at::kByte; }
  bool quantized() const { return int8() || int4(); }
};

// One projection's input rows as its kernel reads them, in the calling thread's buffers.
struct Staged {
  char* data = nullptr;
  int64_t stride = 0;  // elements
  int64_t rows = 0;
  int64_t rows_padded = 0;  // what the buffers hold
  int64_t rows_staged = 0;  // rows, and the zero rows a tile kernel reads after them (all, from 4 rows on)
  int64_t element_size = 0;
  int64_t features = 0;  // the input's width before padding
  // For int8 and int4 weights the rows are staged as int16 with one scale per row and group of group_pairs k pairs
  // (or, for many rows, in the activations' type for dequantized panels). W8A8 and W4A8 rows hold at most
  // `levels` 127, and on AVX512 are staged as bytes (with their offsets, panel_kernels.h) as well; for int4
  // weights (W4A8) each octet of those bytes in the order PanelW4A8Avx512 reads.
  bool int16 = false;
  int16_t levels = 32767;
  float* scales = nullptr;
  int64_t group_pairs = 0;
  int64_t groups = 0;
  int8_t* bytes = nullptr;
  int32_t* offsets = nullptr;
  int32_t* group_sums = nullptr;  // int4 with zero points: each row's sum of its staged values, per group
  bool amx_int8 = false;          // bytes for PanelW8A8Amx, rows of whole tile steps
  bool int4_byte_order = false;   // bytes for PanelW4A8Avx512 (NarrowActivationRow)
  // int4 weights requantized per panel to int8 for PanelW8A8Amx or PanelW8A8Avx512 (int4_requantize.h), the rows
  // with one scale each.
  bool int4_as_int8 = false;
  // What the workers read while they wait once their panels are done (read_ahead.h); none unless set.
  NextPanels read_after;
};

// How int4 batches that AMX-INT8 tiles could take run: on the tiles (the dense projections, faster there:
// docs/performance.md), requantized to int8 where the weight allows (int4_requantize.h) and else summed per group
// where the groups fill whole tile steps; or, from kAmxInt4DequantizedMinRows rows, dequantized to bfloat16 panels
// (the MoE operator, whose one-job path takes no tile staging; its experts were not measured on the tiles). Without
// AMX, kOnTiles lets large batches run requantized on PanelW8A8Avx512 where RequantizesLargeInt4Batches; kDequantized
// keeps them on W4A8.
enum class LargeInt4Batches { kOnTiles, kDequantized };

// The staging a projection's input needs: in the activations' dtype, or int16 (and bytes) in groups for int8
// weights, as the batch's size and the CPU decide.
Staged PrepareStaging(int64_t rows, int64_t k, const PanelWeight& weight, at::ScalarType dtype,
                      LargeInt4Batches large_int4 = LargeInt4Batches::kOnTiles);
// PrepareStaging for a projection of a decode step's fixed sequence, with the read-ahead of the projection that
// comes after it (FollowingPanels). Called on the thread that runs the operators, once per projection.
Staged PrepareStagingReadingAhead(int64_t rows, int64_t k, const PanelWeight& weight, at::ScalarType dtype);
// Grows the calling thread's staging buffers for batches of up to `max_tokens` rows of up to `max_depth`
// inputs, in `dtype` or for int8 weights, without touching their pages.
void ReserveStaging(int64_t max_tokens, int64_t max_depth, at::ScalarType dtype);

// The team has at most this many members (fewer when an operator runs inside another job).
int MaxTeamSize();

template <typename T>
using RowFn = absl::FunctionRef<void(int64_t row, T* dst)>;
// Inside a team job: rows split over the team; row_fn(row, dst) fills the first k elements, the padding is
// zeroed here. Ends with a barrier: the staged rows are complete for every member. T: float or c10::BFloat16.
template <typename T>
void StageRows(TeamMember& member, const Staged& staged, int64_t k, RowFn<T> row_fn);
// One row of RMSNorm(x) * weight (k values, rounded once to T): what StageNormalizedRows stages.
template <typename T>
void NormRow(const T* x, const T* weight, float eps, int64_t k, T* dst);
// StageRows of RMSNorm(x) * norm, the input of the operators that fold the norm in.
template <typename T>
void StageNormalizedRows(TeamMember& member, const Staged& staged, const T* x, const T* norm, float eps, int64_t k);

using PanelEpilogue = absl::FunctionRef<void(int64_t panel, int64_t first_row, int64_t rows, const float* c)>;
// Inside a team job: members claim runs of panels from `queue` (one per operator, over the weight's panels);
// epilogue(panel, first_row, rows, c) sees the float results c[rows][kPanelWidth] of one panel for a block of
// rows.
void MatmulPanels(TeamMember& member, const Staged& a, const PanelWeight& weight, WorkQueue& queue,
                  PanelEpilogue epilogue);

// What MatmulPanels does for one panel, for callers that hand out panels of several weights themselves (the
// mixture of experts' operator): the kernel chosen for the staged rows and the weight, once.
class PanelMultiplier {
 public:
  PanelMultiplier(const Staged& staged, const PanelWeight& weight);
  // Panel p multiplied by every staged row, in blocks handed to `epilogue`; `c` is the member's scratch
  // (TeamMemberScratch).
  void Multiply(int64_t p, float* c, PanelEpilogue epilogue) const;
  int64_t panels = 0;

 private:
  Staged a;
  PanelWeight weight;
  int64_t k_padded = 0, panel_bytes = 0, weight_groups = 0;
  const char* base = nullptr;
  const float* scales = nullptr;
  const uint8_t* exponents = nullptr;  // MXFP4
  const float* zero_offsets = nullptr;
  void (*int8_kernel)(const Int8PanelArgs&) = nullptr;
  bool dequantize = false;
  at::ScalarType plain_type = at::kFloat;
};
// Inside a team job: the calling member's float scratch for one block of panel results.
float* TeamMemberScratch();
// Rows first_row .. first_row + rows - 1 of a staging as a staging of their own (the rows of one expert among
// those staged for all). Not for AMX tile staging, which needs whole tile steps.
Staged StagedRange(const Staged& staged, int64_t first_row, int64_t rows);

template <typename Fn>
void InTeam(Fn&& fn) {
  ThreadTeam::Get().Run([&](TeamMember& member) { fn(member); });
}

// The checks every operator makes of its input and packed weight (at least min_columns output columns).
void CheckPacked(const char* op, const at::Tensor& hidden, const PanelWeight& weight, int64_t min_columns);
// The same for an input of `features` columns of `dtype`.
void CheckPacked(const char* op, int64_t features, at::ScalarType dtype, const PanelWeight& weight,
                 int64_t min_columns);

}  // namespace llmc::model::cpu

#endif  // LLMC_WORKER_MODEL_CPU_PANEL_MATMUL_H_
