#ifndef LLMC_TOOLS_CHAT_CHAT_CONFIG_H_
#define LLMC_TOOLS_CHAT_CHAT_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace llmc::chat {

// The flags of llmc-chat (--max-tokens and --max_tokens are the same flag).
struct ChatConfig {
  std::string url = "http://127.0.0.1:8000/v1";
  std::string model;    // empty: the first model GET /v1/models lists
  std::string api_key;  // empty: $OPENAI_API_KEY when set
  std::string system;
  double temperature = 0.7;
  int64_t max_tokens = 0;  // 0: the server's default
  bool debug = false;
  absl::Duration timeout = absl::Seconds(300);
  std::string extra_body;  // not in --help: a JSON object merged into every request

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("url", url, "base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1");
    v("model", model, "model to chat with; empty takes the first one GET /v1/models lists");
    v("api_key", api_key, "bearer API key; empty uses $OPENAI_API_KEY when set");
    v("system", system, "system prompt sent first in every request (/system changes it)");
    v("temperature", temperature, "sampling temperature");
    v("max_tokens", max_tokens, "most tokens per reply; 0 leaves it to the server");
    v("debug", debug, "show the prompt as the server renders it (vLLM's /tokenize) and speed after each reply");
    v("timeout", timeout, "longest silence of the server, while connecting or streaming, before giving up");
    v("extra_body", extra_body, "JSON object merged into every request body, e.g. {\"ignore_eos\": true}");
  }

  absl::Status Validate() const;
};

// Fields not listed by --help.
inline bool IsHiddenChatFlag(const std::string& key) { return key == "extra_body"; }

std::string ChatHelp();

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_CHAT_CONFIG_H_
