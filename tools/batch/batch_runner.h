#ifndef LLMC_TOOLS_BATCH_BATCH_RUNNER_H_
#define LLMC_TOOLS_BATCH_BATCH_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tools/batch/batch_input.h"
#include "worker/engine/engine.h"
#include "worker/service/constraint_compiler.h"
#include "worker/service/served_model.h"

namespace llmc::batch {

struct BatchSummary {
  int64_t requests = 0;
  int64_t failed = 0;  // lines answered with an error
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  absl::Duration elapsed;
};

// Runs a batch's requests through an in-process engine at full batch and writes the OpenAI batch output,
// one line per input line, in input order: {"id", "custom_id", "response": {"status_code", "request_id",
// "body"}, "error"}. A line that is not a request gets "response": null and an "error"; a request the
// gateway or the worker would refuse gets its status code and error envelope as the body. At most
// `window` engine requests are in flight at a time, so any number of lines (and an embeddings request of
// 2,048 inputs) fits the engine's waiting queue; output is written as soon as the lines before it are done.
class BatchRunner {
 public:
  BatchRunner(engine::Engine& engine, const worker::ServedModel& model, int64_t window, std::ostream& out,
              std::ostream* progress);
  ~BatchRunner();

  // Takes the next line; blocks while the window is full.
  void Add(BatchLine line);
  // Waits for every line to be answered and written.
  BatchSummary Finish();

  // Private to the jobs.
  void EngineRequestDone();
  void JobDone(int64_t index, std::string output_line, bool failed, int64_t prompt_tokens, int64_t completion_tokens);
  void CountTokens(int64_t tokens) { streamed_tokens_ += tokens; }

 private:
  // Writes the answered lines at the front; the caller holds mu_.
  void WriteReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ShowProgress(bool final) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits (mu_ held) until `ready` holds, showing progress meanwhile.
  void AwaitShowingProgress(const absl::Condition& ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  engine::Engine& engine_;
  const worker::ServedModel& model_;
  worker::ConstraintCompiler constraints_;  // structured outputs compile on the reading thread
  const int64_t window_;
  std::ostream& out_;
  std::ostream* const progress_;
  const absl::Time start_;
  std::atomic<int64_t> streamed_tokens_{0};
  absl::Mutex mu_;
  std::deque<std::optional<std::string>> pending_lines_ ABSL_GUARDED_BY(mu_);  // from next_to_write_ on
  int64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_to_write_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  BatchSummary summary_ ABSL_GUARDED_BY(mu_);
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace llmc::batch

#endif  // LLMC_TOOLS_BATCH_BATCH_RUNNER_H_
