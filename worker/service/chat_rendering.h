#ifndef LLMC_WORKER_SERVICE_CHAT_RENDERING_H_
#define LLMC_WORKER_SERVICE_CHAT_RENDERING_H_

#include <string>

#include "absl/status/statusor.h"
#include "llmc/v1/worker.pb.h"
#include "worker/service/served_model.h"

namespace llmc::worker {

// The prompt text of a chat request. The request's own template (chat_template) comes first, then the
// model's Jinja template, then its built-in one. A Jinja template sees the messages as the client sent
// them, `tools` (none when absent), `add_generation_prompt`, the model's special tokens (bos_token, ...)
// and the request's chat_template_kwargs. Every failure is INVALID_ARGUMENT, since the same request can
// never succeed: a template's raise_exception() gives its message unchanged; other template errors and
// limits say "chat template: ...".
absl::StatusOr<std::string> RenderChat(const v1::ChatInput& chat, const ServedModel& model);

}  // namespace llmc::worker

#endif  // LLMC_WORKER_SERVICE_CHAT_RENDERING_H_
