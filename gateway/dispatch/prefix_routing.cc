#include "gateway/dispatch/prefix_routing.h"

#include "absl/strings/str_cat.h"
#include "common/prefix_hash.h"

namespace llmc::gateway {

std::string RoutingKey(const v1::GenerateRequest& request) {
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      return absl::StrCat("p\x1f", request.prompt());
    case v1::GenerateRequest::kPromptTokenIds: {
      const auto& ids = request.prompt_token_ids().ids();
      std::string key = "t\x1f";
      key.append(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int32_t));
      return key;
    }
    case v1::GenerateRequest::kChat: {
      const v1::ChatInput& chat = request.chat();
      std::string key = absl::StrCat("c\x1f", chat.tools_json(), "\x1f", chat.chat_template(), "\x1f");
      if (!chat.messages_json().empty()) return key + chat.messages_json();
      for (const v1::ChatMessage& message : chat.messages()) {
        absl::StrAppend(&key, message.role(), "\x1f", message.content(), "\x1e");
      }
      return key;
    }
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return "";
}

std::vector<uint64_t> RequestPrefixHashes(const v1::GenerateRequest& request) {
  return PrefixChunkHashes(RoutingKey(request));
}

}  // namespace llmc::gateway
