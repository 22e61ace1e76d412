#ifndef LLMC_GATEWAY_OPENAI_CACHE_SALT_H_
#define LLMC_GATEWAY_OPENAI_CACHE_SALT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace llmc::gateway {

// The per-API-key part of a request's cache salt (gateway config cache_salt_per_api_key): 32 hex digits of
// HMAC-SHA256 keyed with the API key the request presented ("Bearer <key>" in `authorization`), so requests
// made with different keys never share prefix-cache blocks, and the key itself never leaves the gateway.
// "" when `authorization` carries no bearer token.
std::string ApiKeySaltPart(absl::string_view authorization);

// The cache salt a worker gets when salts are per API key: the key's part and the request's own cache_salt
// (either may be empty), joined so that no two pairs give the same salt.
std::string CombineCacheSalt(absl::string_view key_part, absl::string_view request_salt);

// HMAC-SHA256 (RFC 2104, FIPS 180-4): the 32-byte tag.
std::string HmacSha256(absl::string_view key, absl::string_view message);

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_OPENAI_CACHE_SALT_H_
