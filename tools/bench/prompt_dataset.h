#ifndef LLMC_TOOLS_BENCH_PROMPT_DATASET_H_
#define LLMC_TOOLS_BENCH_PROMPT_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llmc::bench {

// One request of a benchmark: the prompt text, its length as the dataset estimates it (words for the
// random dataset and prompts files; the server's usage replaces it when reported) and its max_tokens.
struct BenchPrompt {
  std::string prompt;
  int64_t input_len = 0;
  int64_t output_len = 0;
  // Multi-turn runs: the conversation and the turn this is the user message of; the request also sends
  // the conversation so far (system prompt, earlier turns and their answers). -1: a single request.
  int64_t conversation = -1;
  int32_t turn = 0;
};

// How many words start every random prompt to make it unique: they encode the run id and the request
// index, so no server can answer any request from a cached prompt of this run or of another run.
inline constexpr int kUniquePrefixWords = 7;

// The 256 words random prompts are made of: common English words that are each one token (with the
// leading space) in byte-level BPE vocabularies such as Qwen2/3's and Llama 3's.
const std::vector<std::string>& PromptWords();

struct RandomDatasetOptions {
  int64_t num_prompts = 100;
  int64_t input_len = 256;
  int64_t output_len = 128;
  double range_ratio = 0.0;  // lengths uniform in [len*(1-r), len*(1+r)]
  uint64_t seed = 0;
  uint32_t run_id = 0;
};

// Random prompts: kUniquePrefixWords words derived from (run_id, index), then seeded random words up to
// the drawn length (at least the prefix). Deterministic for the same options.
std::vector<BenchPrompt> MakeRandomPrompts(const RandomDatasetOptions& options);

// Multi-turn conversations: `options.num_prompts` conversations of `turns` user messages each (random
// prompts, as MakeRandomPrompts makes them), conversation by conversation, turn by turn. The returned
// system prompt (`shared_prefix_words` seeded random words, empty for 0) starts every conversation.
struct Conversations {
  std::vector<BenchPrompt> prompts;
  std::string system_prompt;
};
Conversations MakeConversations(const RandomDatasetOptions& options, int32_t turns, int64_t shared_prefix_words);

// Reads a JSONL file: one object per line with a string "prompt" and an optional positive integer
// "output_len" (else `default_output_len`); blank lines are skipped. Errors name the line. When the file
// has fewer prompts than `num_prompts` it is cycled.
absl::StatusOr<std::vector<BenchPrompt>> LoadPromptsFile(const std::string& path, int64_t num_prompts,
                                                         int64_t default_output_len);

// Whitespace-separated words in `text`: the length estimate of a prompt from a file.
int64_t CountWords(const std::string& text);

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_PROMPT_DATASET_H_
