#include "tests/support/small_model.h"

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/fixture_cache.h"
#include "tests/support/tokenizer_files.h"

namespace llmc::testing {

namespace {

// make()'s package folder, made once per process and `key` (the first caller makes it, the others wait).
std::string Remembered(const std::string& key, const std::function<std::string()>& make) {
  static std::mutex mu;
  static std::map<std::string, std::string>* packages = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  std::string& package = (*packages)[key];
  if (package.empty()) package = make();
  return package;
}

// Exports a small random-weight package once per build folder and `key` (CachedFolder), remembered per process.
std::string ExportOnce(const std::string& key, const std::string& name, const std::string& tokenizer,
                       const std::string& seed, const std::string& eos, const std::string& quantize,
                       const std::string& embedding_pooling = "last", const std::string& preset = "small") {
  return Remembered("small-model-" + key, [&] {
    const std::vector<std::string> args = {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py",
                                           "--random",
                                           "--preset",
                                           preset,
                                           "--seed",
                                           seed,
                                           "--dtype",
                                           "bfloat16",
                                           "--eos-token-id",
                                           eos,
                                           "--name",
                                           name,
                                           "--tokenizer",
                                           TokenizerJsonPath(tokenizer),
                                           "--quantize",
                                           quantize,
                                           "--embedding-pooling",
                                           embedding_pooling};
    const std::string folder = CachedFolder("small-model-" + key, args, [&](const std::string& out) {
      RunPythonInto(args, out + "/" + name, "exporting " + name);
    });
    return folder + "/" + name;
  });
}

// Writes a checkpoint with `checkpoint` (a script of tests/python and its arguments) and exports it under the small
// package's name with the Qwen3 tokenizer, once per build folder and key (CachedFolder), remembered per process.
std::string ExportCheckpointOnce(const std::string& key, const std::vector<std::string>& checkpoint) {
  return Remembered(key, [&] {
    const std::vector<std::string> export_flags = {"--dtype",       "bfloat16",    "--name",
                                                   kSmallModelName, "--tokenizer", TokenizerJsonPath("qwen3")};
    std::vector<std::string> inputs = checkpoint;
    inputs.insert(inputs.end(), export_flags.begin(), export_flags.end());
    const std::string dir = CachedFolder(key, inputs, [&](const std::string& out) {
      RunPythonInto(checkpoint, out + "/checkpoint", "making the checkpoint for " + key);
      std::vector<std::string> export_package = {std::string(LLMC_SOURCE_DIR) + "/tools/export_model.py",
                                                 "--checkpoint", out + "/checkpoint"};
      export_package.insert(export_package.end(), export_flags.begin(), export_flags.end());
      RunPythonInto(export_package, out + "/" + kSmallModelName, "exporting the checkpoint for " + key);
    });
    return dir + "/" + kSmallModelName;
  });
}

}  // namespace

std::string SmallModelPackage(const std::string& quantize) {
  return ExportOnce(quantize, kSmallModelName, "qwen3", "1", "151645", quantize);
}

std::string SmallMoePackage(const std::string& quantize) {
  return ExportOnce("moe-" + quantize, kSmallModelName, "qwen3", "1", "151645", quantize, "last", "small-moe");
}

std::string SmallGptOssPackage(const std::string& quantize) {
  return ExportOnce("gpt-oss-" + quantize, kSmallModelName, "gptoss", "1", "200002", quantize, "last", "small-gpt-oss");
}

std::string SmallW8A16CheckpointPackage() {
  return ExportCheckpointOnce("small-w8a16-checkpoint",
                              {std::string(LLMC_SOURCE_DIR) + "/tests/python/int8_checkpoint.py", "--shape", "small",
                               "--seed", "1", "--strategy", "group", "--group-size", "32", "--packed", "--w8a16"});
}

std::string SmallInt4CheckpointPackage(const std::string& format, bool act_order) {
  std::vector<std::string> checkpoint = {std::string(LLMC_SOURCE_DIR) + "/tests/python/int4_checkpoint.py",
                                         "--shape",
                                         "small",
                                         "--seed",
                                         "1",
                                         "--format",
                                         format,
                                         "--group-size",
                                         "64",
                                         "--asymmetric"};
  if (act_order) checkpoint.push_back("--act-order");
  return ExportCheckpointOnce("small-int4-checkpoint-" + format + (act_order ? "-act-order" : ""), checkpoint);
}

std::string SecondSmallModelPackage() {
  return ExportOnce("second", kSecondSmallModelName, "llama3", "2", "128009", "none", "mean");
}

std::vector<std::string> SmallWorkerArgs(const std::string& controller_address, const std::string& worker_id,
                                         const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--controller_address=" + controller_address, "--worker_id=" + worker_id,
                                   "--device=cpu", "--num_threads=1", "--kv_cache_bytes=" + std::to_string(64 << 20)};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace llmc::testing
