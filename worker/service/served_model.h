#ifndef LLMC_WORKER_SERVICE_SERVED_MODEL_H_
#define LLMC_WORKER_SERVICE_SERVED_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "llmc/v1/types.pb.h"
#include "nlohmann/json.hpp"
#include "worker/engine/engine.h"
#include "worker/jinja/template.h"
#include "worker/model/model_manifest.h"
#include "worker/tokenizer/chat_template.h"
#include "worker/tokenizer/tokenizer.h"
#include "worker/typed_output/output_format.h"

namespace llmc::worker {

// What the service side knows about the one model this worker serves. The tokenizer (and the engine the
// info came from) must outlive it.
struct ServedModel {
  v1::ModelInfo info;  // as clients and the controller see it; max_context_length is the served limit
  const tokenizer::Tokenizer* tokenizer = nullptr;
  const tokenizer::ChatTemplate* chat_template = nullptr;  // null when the package names no built-in template
  // The model's own Jinja template (chat_template_file), which wins over the built-in one; null when none.
  std::shared_ptr<const jinja::Template> jinja_template;
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // bos_token, eos_token, ...
  // Whether the Jinja template loops over a message's content (so content parts reach it as a list);
  // else text parts are joined into one string first, as vLLM does for string-based templates.
  bool template_reads_content_parts = false;
  bool trust_request_chat_template = false;  // render a request's own chat_template
  // Template variables every chat gets under the request's own chat_template_kwargs (worker config).
  nlohmann::ordered_json default_chat_template_kwargs = nlohmann::ordered_json::object();
  int64_t embedding_size = 0;  // the model's hidden size: the length of its embeddings
  // How the model's text is read back as typed output (docs/tool-calling.md): its tool-call format and the
  // markers around its reasoning. The package's (manifest tool_call_format and reasoning) unless the worker's
  // tool_call_parser / reasoning_parser name others.
  typed_output::ToolCallFormat tool_call_format = typed_output::ToolCallFormat::kNone;
  typed_output::ReasoningMarkers reasoning;

  const std::string& name() const { return info.name(); }
  int64_t max_model_len() const { return info.max_context_length(); }
  // Prompt ids must be below this: the model's embedding size.
  int64_t vocab_size() const { return info.vocab_size(); }
};

// Describes `engine`'s model under `name` (empty: the manifest's name), with the package's output formats.
ServedModel MakeServedModel(const engine::Engine& engine, const tokenizer::Tokenizer& tokenizer,
                            const std::string& name);

// Parses the package's Jinja chat template (manifest chat_template_file) into `served`, with its special
// tokens. INVALID_ARGUMENT naming the file and line when the template does not parse or uses what the
// interpreter does not support, so the worker refuses to start rather than format chats wrong.
absl::Status LoadPackageChatTemplate(const std::string& package_dir, const model::ModelManifest& manifest,
                                     ServedModel& served);

// Applies the worker's tool_call_parser ("auto": keep the package's, else a typed_output::ToolCallFormat name)
// and reasoning_parser ("auto": the package's; "none"; "think": <think>...</think>) to `served`.
// INVALID_ARGUMENT naming the key for any other value.
absl::Status ApplyOutputFormatOverrides(const std::string& tool_call_parser, const std::string& reasoning_parser,
                                        ServedModel& served);

// Whether a Jinja template iterates a message's content ({% for part in message['content'] %}).
bool TemplateReadsContentParts(const std::string& source);

v1::WorkerLoad ToWorkerLoad(const engine::EngineLoad& load);

// "<hostname>-<pid>": unique per process on a host, recognisable in logs.
std::string DefaultWorkerId();

// The llmc version this worker reports to the controller and in GetStatus.
const char* WorkerVersion();

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_SERVED_MODEL_H_
