#include "worker/service/served_model.h"

#include <unistd.h>

#include <climits>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace llmc::worker {

ServedModel MakeServedModel(const engine::Engine& engine, const tokenizer::Tokenizer& tokenizer,
                            const std::string& name) {
  const model::ModelManifest& manifest = engine.manifest();
  ServedModel served;
  served.info.set_name(name.empty() ? manifest.name : name);
  served.info.set_max_context_length(static_cast<uint32_t>(engine.max_model_len()));
  served.info.set_chat_template(manifest.chat_template);
  served.info.set_architecture(manifest.architecture);
  served.info.set_dtype(engine.dtype());
  served.info.set_quantization(manifest.quantization);
  served.info.set_embedding_pooling(manifest.embedding_pooling);
  served.embedding_size = manifest.hidden_size;
  served.info.set_device(engine.device());
  served.info.set_vocab_size(static_cast<uint32_t>(manifest.vocab_size));
  served.tokenizer = &tokenizer;
  // ReadModelManifest has checked the name; a manifest made in code with another one means no tool calls.
  absl::StatusOr<typed_output::ToolCallFormat> tool_call_format =
      typed_output::ParseToolCallFormat(manifest.tool_call_format);
  if (tool_call_format.ok()) {
    served.tool_call_format = *tool_call_format;
  } else {
    LLMC_LOG(Warning) << "tool calls will be read as content: " << tool_call_format.status().message();
  }
  served.reasoning = {manifest.reasoning_start, manifest.reasoning_end};
  if (!manifest.chat_template.empty()) {
    absl::StatusOr<const tokenizer::ChatTemplate*> chat_template = tokenizer::FindChatTemplate(manifest.chat_template);
    if (chat_template.ok()) {
      served.chat_template = *chat_template;
    } else {
      LLMC_LOG(Warning) << "chat requests will be refused: " << chat_template.status().message();
    }
  }
  return served;
}

absl::Status ApplyOutputFormatOverrides(const std::string& tool_call_parser, const std::string& reasoning_parser,
                                        ServedModel& served) {
  if (tool_call_parser != "auto") {
    absl::StatusOr<typed_output::ToolCallFormat> format = typed_output::ParseToolCallFormat(tool_call_parser);
    if (!format.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tool_call_parser: ", format.status().message(), " (or auto, the package's)"));
    }
    served.tool_call_format = *format;
  }
  if (reasoning_parser == "none") {
    served.reasoning = {};
  } else if (reasoning_parser == "think") {
    served.reasoning = {"<think>", "</think>"};
  } else if (reasoning_parser != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("reasoning_parser must be auto, none or think, got '", reasoning_parser, "'"));
  }
  return absl::OkStatus();
}

bool TemplateReadsContentParts(const std::string& source) {
  static const std::regex* const kLoopOverContent =
      new std::regex(R"(\{%-?\s*for\s+[\w, ]+\s+in\s+[^%]*content)", std::regex::optimize);
  return std::regex_search(source, *kLoopOverContent);
}

absl::Status LoadPackageChatTemplate(const std::string& package_dir, const model::ModelManifest& manifest,
                                     ServedModel& served) {
  for (const auto& [name, token] : manifest.special_tokens) served.special_tokens[name] = token;
  if (manifest.chat_template_file.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat(package_dir, "/", manifest.chat_template_file);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the model's chat template ", path));
  std::stringstream source;
  source << in.rdbuf();
  absl::StatusOr<std::unique_ptr<jinja::Template>> parsed = jinja::Template::Parse(source.str(), {});
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  served.jinja_template = *std::move(parsed);
  served.template_reads_content_parts = TemplateReadsContentParts(source.str());
  served.info.set_chat_template(manifest.chat_template_file);
  return absl::OkStatus();
}

v1::WorkerLoad ToWorkerLoad(const engine::EngineLoad& load) {
  v1::WorkerLoad out;
  out.set_num_waiting(static_cast<uint32_t>(load.num_waiting));
  out.set_num_running(static_cast<uint32_t>(load.num_running));
  out.set_kv_cache_usage(static_cast<float>(load.kv_cache_usage()));
  out.set_max_running(static_cast<uint32_t>(load.max_running));
  out.set_max_waiting(static_cast<uint32_t>(load.max_waiting));
  out.set_tokens_per_second(static_cast<float>(load.tokens_per_second));
  out.set_pending_prefill_tokens(static_cast<uint64_t>(load.pending_prefill_tokens));
  out.set_prefill_tokens_per_second(static_cast<float>(load.prefill_tokens_per_second));
  return out;
}

std::string DefaultWorkerId() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return absl::StrCat("worker-", ::getpid());
  return absl::StrCat(host, "-", ::getpid());
}

const char* WorkerVersion() { return LLMC_VERSION; }

}  // namespace llmc::worker
