#include "tests/support/small_model.h"

#include <map>
#include <mutex>
#include <stdexcept>

#include "tests/support/child_process.h"
#include "tests/support/tokenizer_files.h"

namespace llmc::testing {

std::string SmallModelPackage(const std::string& quantize) {
  static std::mutex mu;
  static std::map<std::string, std::string>* packages = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  std::string& package = (*packages)[quantize];
  if (package.empty()) {
    const std::string out = MakeTempDir("llmc-small-model-" + quantize) + "/" + kSmallModelName;
    const CommandResult result =
        RunCommand(LLMC_PYTHON,
                   {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py", "--random", "--preset", "small", "--seed",
                    "1", "--dtype", "bfloat16", "--eos-token-id", "151645", "--name", kSmallModelName, "--tokenizer",
                    TokenizerJsonPath("qwen3"), "--quantize", quantize, "--out", out},
                   absl::Seconds(240));
    if (result.exit_code != 0) throw std::runtime_error("exporting the small model failed:\n" + result.output);
    package = out;
  }
  return package;
}

std::vector<std::string> SmallWorkerArgs(const std::string& controller_address, const std::string& worker_id,
                                         const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--controller_address=" + controller_address, "--worker_id=" + worker_id,
                                   "--device=cpu", "--num_threads=1", "--kv_cache_bytes=" + std::to_string(64 << 20)};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace llmc::testing
