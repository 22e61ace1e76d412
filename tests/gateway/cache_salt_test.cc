// vLLM's cache_salt: parsed and bounded on chat and completions, carried into every prompt's generation,
// first in the prefix-routing key; the per-API-key part is a keyed hash of the key (HMAC-SHA256).
#include "gateway/openai/cache_salt.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gateway/dispatch/prefix_routing.h"
#include "tests/gateway/openai_request_parsing.h"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

TEST_CASE("cache_salt: chat and completions carry it to every generation, absent is empty", "[unit][openai]") {
  const absl::StatusOr<OpenAiRequest> chat = Chat({{"cache_salt", "tenant-1"}});
  REQUIRE(chat.ok());
  CHECK(chat->generate.cache_salt() == "tenant-1");
  const absl::StatusOr<OpenAiRequest> completion =
      Completion({{"cache_salt", "tenant-2"}, {"prompt", nlohmann::json::array({"a", "b"})}});
  REQUIRE(completion.ok());
  CHECK(completion->generate.cache_salt() == "tenant-2");
  REQUIRE(completion->further_prompts.size() == 1);
  CHECK(completion->further_prompts[0].cache_salt() == "tenant-2");
  const absl::StatusOr<OpenAiRequest> plain = Chat();
  REQUIRE(plain.ok());
  CHECK(plain->generate.cache_salt().empty());
}

TEST_CASE("cache_salt: a wrong type, an empty string or one too long is a 400 naming it", "[unit][openai]") {
  ExpectInvalid(Chat({{"cache_salt", 5}}), "cache_salt");
  ExpectInvalid(Completion({{"cache_salt", nlohmann::json::array({"a"})}}), "cache_salt");
  ExpectInvalid(Chat({{"cache_salt", ""}}), "cache_salt", "non-empty");
  ExpectInvalid(Completion({{"cache_salt", std::string(257, 'x')}}), "cache_salt", "256 bytes");
  CHECK(Chat({{"cache_salt", std::string(256, 'x')}}).ok());
}

TEST_CASE("cache_salt: the routing key starts with the salt, so salts never share a routed prefix", "[unit][openai]") {
  v1::GenerateRequest request;
  request.set_prompt("the same long shared system prompt");
  const std::string unsalted = RoutingKey(request);
  request.set_cache_salt("ab");
  const std::string salted = RoutingKey(request);
  request.set_cache_salt("a");
  const std::string other = RoutingKey(request);
  CHECK(salted != unsalted);
  CHECK(salted.find(unsalted) != std::string::npos);  // the prompt part is unchanged, after the salt
  CHECK(salted.substr(0, 4) != other.substr(0, 4));
}

TEST_CASE("cache_salt: HMAC-SHA256 matches RFC 4231", "[unit][openai]") {
  // Test case 2, and test case 6 (a key longer than the block, hashed first).
  CHECK(absl::BytesToHexString(HmacSha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(absl::BytesToHexString(
            HmacSha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("cache_salt: the per-API-key part is a keyed hash of the bearer key, never the key", "[unit][openai]") {
  const std::string alice = ApiKeySaltPart("Bearer sk-alice");
  CHECK(alice.size() == 32);
  CHECK(alice.find("sk-alice") == std::string::npos);
  CHECK(ApiKeySaltPart("bearer   sk-alice ") == alice);
  CHECK(ApiKeySaltPart("Bearer sk-bob") != alice);
  CHECK(ApiKeySaltPart("").empty());
  CHECK(ApiKeySaltPart("Basic dXNlcjpwYXNz").empty());
  // Joined with the request's own salt so that no two pairs meet.
  CHECK(CombineCacheSalt(alice, "x") != CombineCacheSalt(alice, ""));
  CHECK(CombineCacheSalt(alice, "") != CombineCacheSalt("", alice));
  CHECK(CombineCacheSalt("ab", "c") != CombineCacheSalt("a", "bc"));
  CHECK(CombineCacheSalt(alice, std::string(256, 'x')).size() <= 512);
}

}  // namespace
}  // namespace llmc::gateway
