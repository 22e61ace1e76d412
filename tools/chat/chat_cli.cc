#include "tools/chat/chat_cli.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/config_field.h"
#include "common/config/config_loader.h"
#include "tools/bench/bench_config.h"
#include "tools/bench/openai_protocol.h"
#include "tools/chat/chat_client.h"
#include "tools/chat/chat_config.h"
#include "tools/chat/chat_protocol.h"
#include "tools/chat/chat_session.h"
#include "tools/chat/interrupt_signal.h"
#include "tools/chat/line_reader.h"

namespace llmc::chat {
namespace {

constexpr int kExitServerUnusable = 1;
constexpr int kExitBadFlags = 2;
constexpr int kExitInterrupted = 130;

// The model to chat with: --model when the server lists it, else the first one listed.
absl::StatusOr<std::string> ChooseModel(const ServerConnection& server, const std::string& requested,
                                        std::ostream& err) {
  absl::StatusOr<std::vector<std::string>> models = ListModels(server);
  if (!models.ok()) {
    std::string message = absl::StrCat("cannot list the models at http://", server.url.HostHeader(),
                                       bench::ModelsPath(server.url), ": ", models.status().message());
    if (absl::IsUnauthenticated(models.status())) absl::StrAppend(&message, " (check --api_key or $OPENAI_API_KEY)");
    return absl::Status(models.status().code(), message);
  }
  if (models->empty()) return absl::NotFoundError("the server lists no models");
  if (requested.empty()) {
    err << "llmc-chat: using model " << models->front() << " (the first the server lists; --model picks another)\n";
    return models->front();
  }
  if (std::find(models->begin(), models->end(), requested) == models->end()) {
    return absl::NotFoundError(
        absl::StrCat("the server has no model '", requested, "' (it serves: ", absl::StrJoin(*models, ", "), ")"));
  }
  return requested;
}

}  // namespace

int ChatMain(const std::vector<std::string>& raw_args, int input_fd, std::ostream& out, std::ostream& err) {
  const std::vector<std::string> args = bench::NormalizeFlagArgs(raw_args);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      out << ChatHelp();
      return 0;
    }
    if (arg == "--config" || absl::StartsWith(arg, "--config=")) {
      err << "llmc-chat: takes flags only (no --config file)\n";
      return kExitBadFlags;
    }
  }
  ChatConfig config;
  std::vector<config::ConfigField> fields = config::CollectConfigFields(config);
  const config::ProgramInfo program{"llmc-chat", "chat", "terminal chat with an OpenAI-compatible server"};
  auto loaded = config::LoadConfigFromArgs(
      program, args, fields, [&config] { return config.Validate(); }, out);
  if (!loaded.ok()) {
    err << "llmc-chat: " << loaded.status().message() << "\n";
    return kExitBadFlags;
  }
  if (*loaded == config::ConfigOutcome::kExit) return 0;
  absl::StatusOr<nlohmann::json> extra_body = ParseExtraBody(config.extra_body);
  if (!extra_body.ok()) {
    err << "llmc-chat: " << extra_body.status().message() << "\n";
    return kExitBadFlags;
  }
  absl::StatusOr<bench::ServerUrl> url = bench::ParseBaseUrl(config.url);
  if (!url.ok()) {
    err << "llmc-chat: " << url.status().message() << "\n";
    return kExitServerUnusable;
  }

  // A closed terminal or pipe on stdout should end the program through write errors, not kill it mid-request.
  std::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<InterruptSignal>> interrupts = InterruptSignal::Install();
  if (!interrupts.ok()) {
    err << "llmc-chat: " << interrupts.status().message() << "\n";
    return kExitServerUnusable;
  }
  ChatSessionOptions options;
  options.server.url = *url;
  options.server.api_key = config.api_key;
  if (options.server.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY"); env != nullptr) options.server.api_key = env;
  }
  options.server.idle_timeout = config.timeout;
  options.server.cancel_fd = (*interrupts)->fd();
  absl::StatusOr<std::string> model = ChooseModel(options.server, config.model, err);
  if (absl::IsCancelled(model.status())) return kExitInterrupted;
  if (!model.ok()) {
    err << "llmc-chat: " << model.status().message() << "\n";
    return kExitServerUnusable;
  }
  options.request.model = *model;
  options.request.temperature = config.temperature;
  options.request.max_tokens = config.max_tokens;
  options.request.extra_body = *std::move(extra_body);
  options.system = config.system;
  options.debug = config.debug;

  ChatSession session(std::move(options), **interrupts, out, err);
  LineReader reader(input_fd, **interrupts, out);
  if (reader.is_terminal()) err << "llmc-chat: chatting with " << *model << "; /help lists the commands\n";
  while (std::optional<std::string> message = reader.ReadMessage("USER: ", "... ")) {
    if (!session.Handle(*message)) break;
  }
  out.flush();
  return 0;
}

}  // namespace llmc::chat
