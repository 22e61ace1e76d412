// Responses merged while a stream's reader is behind read as if one step had produced them.
#include "worker/service/response_merge.h"

#include <vector>

#include "tests/support/catch.h"

namespace llmc::worker {
namespace {

v1::TokenDelta Delta(uint32_t choice, uint32_t index, int32_t token, const std::string& text) {
  v1::TokenDelta delta;
  delta.set_choice_index(choice);
  delta.set_index(index);
  delta.add_token_ids(token);
  delta.set_text(text);
  delta.add_logprobs()->set_token_id(token);
  return delta;
}

TEST_CASE("response merge: each choice keeps one delta with tokens, text and logprobs in order", "[unit][worker]") {
  v1::GenerateResponse earlier;
  *earlier.add_deltas() = Delta(0, 0, 10, "Hel");
  earlier.add_prompt_token_ids(7);
  v1::GenerateResponse later;
  later.add_prompt_logprobs()->set_token_id(7);  // as if the reader fell behind before the first message
  *later.add_deltas() = Delta(1, 0, 20, "Bon");
  *later.add_deltas() = Delta(0, 1, 11, "lo");
  v1::GenerateResponse last;
  v1::TokenDelta end = Delta(0, 2, 12, "!");
  end.set_finish_reason(v1::FINISH_REASON_STOP);
  end.set_stop_reason("12");
  *last.add_deltas() = end;
  last.mutable_usage()->set_completion_tokens(4);

  MergeInto(earlier, later);
  MergeInto(earlier, last);
  REQUIRE(earlier.deltas_size() == 2);
  const v1::TokenDelta& zero = earlier.deltas(0);
  CHECK(zero.choice_index() == 0);
  CHECK(zero.index() == 0);
  CHECK(std::vector<int32_t>(zero.token_ids().begin(), zero.token_ids().end()) == std::vector<int32_t>{10, 11, 12});
  CHECK(zero.text() == "Hello!");
  REQUIRE(zero.logprobs_size() == 3);
  CHECK(zero.logprobs(2).token_id() == 12);
  CHECK(zero.finish_reason() == v1::FINISH_REASON_STOP);
  CHECK(zero.stop_reason() == "12");
  const v1::TokenDelta& one = earlier.deltas(1);
  CHECK(one.choice_index() == 1);
  CHECK(one.text() == "Bon");
  CHECK(one.finish_reason() == v1::FINISH_REASON_UNSPECIFIED);
  CHECK(earlier.usage().completion_tokens() == 4);
  CHECK(earlier.prompt_token_ids_size() == 1);
  REQUIRE(earlier.prompt_logprobs_size() == 1);
  CHECK(earlier.prompt_logprobs(0).token_id() == 7);
}

TEST_CASE("response merge: typed parts append in order", "[unit][worker]") {
  v1::GenerateResponse earlier;
  v1::TokenDelta& first = *earlier.add_deltas();
  first.mutable_typed()->set_reasoning("think");
  first.mutable_typed()->set_content("a");
  v1::GenerateResponse later;
  v1::TokenDelta& second = *later.add_deltas();
  second.mutable_typed()->set_content("b");
  v1::ToolCallDelta& call = *second.mutable_typed()->add_tool_calls();
  call.set_id("call_1");
  call.set_name("f");
  call.set_arguments("{}");
  MergeInto(earlier, later);
  REQUIRE(earlier.deltas_size() == 1);
  const v1::TypedOutput& typed = earlier.deltas(0).typed();
  CHECK(typed.reasoning() == "think");
  CHECK(typed.content() == "ab");
  REQUIRE(typed.tool_calls_size() == 1);
  CHECK(typed.tool_calls(0).name() == "f");
}

// A prompt logprob entry of about 200 bytes: 20 alternatives.
v1::TokenLogprob PromptEntry(int32_t id) {
  v1::TokenLogprob entry;
  entry.set_token_id(id);
  entry.set_token("tok");
  entry.set_logprob(-1.0f);
  for (int k = 0; k < 20; ++k) {
    v1::TopLogprob* top = entry.add_top();
    top->set_token_id(k);
    top->set_token("t");
    top->set_logprob(-2.0f);
  }
  return entry;
}

TEST_CASE("response merge: a long prompt's logprobs split into bounded parts, in order, the last with the deltas",
          "[unit][worker]") {
  v1::GenerateResponse response;
  for (int32_t i = 0; i < 1000; ++i) *response.add_prompt_logprobs() = PromptEntry(i);
  *response.add_deltas() = Delta(0, 0, 10, "Hel");
  response.add_prompt_token_ids(7);
  const size_t whole = response.ByteSizeLong();
  constexpr size_t kPart = 16 << 10;
  REQUIRE(whole > 8 * kPart);

  std::vector<v1::GenerateResponse> parts = SplitPromptLogprobs(response, kPart);
  REQUIRE(parts.size() > 8);
  int32_t next = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    INFO("part " << i);
    const bool last = i + 1 == parts.size();
    CHECK(parts[i].ByteSizeLong() <= kPart + (last ? 64 : 0));  // the last also carries the deltas
    CHECK(parts[i].deltas_size() == (last ? 1 : 0));
    for (const v1::TokenLogprob& entry : parts[i].prompt_logprobs()) CHECK(entry.token_id() == next++);
  }
  CHECK(next == 1000);
  CHECK(parts.back().prompt_token_ids_size() == 1);

  // Merged back (a reader far behind), they read as the one message.
  v1::GenerateResponse merged = std::move(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) MergeInto(merged, std::move(parts[i]));
  CHECK(merged.prompt_logprobs_size() == 1000);
  CHECK(merged.prompt_logprobs(999).token_id() == 999);
  CHECK(merged.deltas(0).text() == "Hel");

  // A small one, or one without prompt logprobs, stays whole.
  v1::GenerateResponse small;
  *small.add_prompt_logprobs() = PromptEntry(1);
  *small.add_deltas() = Delta(0, 0, 10, "Hel");
  CHECK(SplitPromptLogprobs(small, kPart).size() == 1);
}

}  // namespace
}  // namespace llmc::worker
