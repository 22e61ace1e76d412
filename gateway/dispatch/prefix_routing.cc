#include "gateway/dispatch/prefix_routing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/prefix_hash.h"

namespace llmc::gateway {

namespace {

// Appends what still fits under kMaxPrefixBytes, the most the hashes look at.
void AppendCapped(std::string& key, absl::string_view part) {
  if (key.size() < kMaxPrefixBytes) key.append(part.data(), std::min(part.size(), kMaxPrefixBytes - key.size()));
}

}  // namespace

std::string RoutingKey(const v1::GenerateRequest& request) {
  std::string key;
  // Salted requests share a worker's cached blocks only with the same salt, so they route by prefix only
  // with them too (the length first: no salt is the start of another's key).
  if (!request.cache_salt().empty())
    AppendCapped(key, absl::StrCat("s", request.cache_salt().size(), ":", request.cache_salt()));
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      AppendCapped(key, "p\x1f");
      AppendCapped(key, request.prompt());
      break;
    case v1::GenerateRequest::kPromptTokenIds: {
      const auto& ids = request.prompt_token_ids().ids();
      AppendCapped(key, "t\x1f");
      AppendCapped(key, absl::string_view(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t)));
      break;
    }
    case v1::GenerateRequest::kChat: {
      const v1::ChatInput& chat = request.chat();
      for (const absl::string_view part :
           {absl::string_view("c\x1f"), absl::string_view(chat.tools_json()), absl::string_view("\x1f"),
            absl::string_view(chat.chat_template()), absl::string_view("\x1f")}) {
        AppendCapped(key, part);
      }
      if (!chat.messages_json().empty()) {
        AppendCapped(key, chat.messages_json());
        break;
      }
      for (const v1::ChatMessage& message : chat.messages()) {
        for (const absl::string_view part : {absl::string_view(message.role()), absl::string_view("\x1f"),
                                             absl::string_view(message.content()), absl::string_view("\x1e")}) {
          AppendCapped(key, part);
        }
      }
      break;
    }
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return key;
}

std::vector<uint64_t> RequestPrefixHashes(const v1::GenerateRequest& request) {
  return PrefixChunkHashes(RoutingKey(request));
}

}  // namespace llmc::gateway
