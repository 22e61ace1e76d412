#include "worker/tokenizer/stop_string_matcher.h"

#include <catch2/catch.hpp>

namespace llmc::tokenizer {
namespace {

struct Streamed {
  std::string text;
  bool stopped = false;
  std::string matched;
};

Streamed Stream(const std::vector<std::string>& chunks, const std::vector<std::string>& stops, bool include = false) {
  StopStringMatcher matcher(stops, include);
  Streamed out;
  for (const auto& chunk : chunks) {
    auto result = matcher.Add(chunk);
    out.text += result.text;
    if (result.stopped) {
      out.stopped = true;
      out.matched = result.matched;
    }
  }
  if (!out.stopped) out.text += matcher.Finish();
  return out;
}

TEST_CASE("stop strings: the output is the text before the stop at every split position", "[unit][stop]") {
  const std::string text = "The answer is 42.\n###\nIgnored tail ### more";
  const std::vector<std::string> stops = {"\n###", "STOP"};
  for (size_t first = 0; first <= text.size(); ++first) {
    for (size_t second = first; second <= text.size(); second += 3) {
      const auto out = Stream({text.substr(0, first), text.substr(first, second - first), text.substr(second)}, stops);
      INFO("split at " << first << " and " << second);
      CHECK(out.text == "The answer is 42.");
      CHECK(out.stopped);
      CHECK(out.matched == "\n###");
    }
  }
}

TEST_CASE("stop strings: text is never held back longer than needed, and released at the end", "[unit][stop]") {
  StopStringMatcher matcher({"</answer>"});
  CHECK(matcher.Add("value <").text == "value ");  // "<" might start the stop string
  CHECK(matcher.Add("/ans").text.empty());
  CHECK(matcher.Add("wer ").text == "</answer ");  // it did not
  CHECK(matcher.Add("</an").text.empty());
  CHECK(matcher.Finish() == "</an");  // generation ended without the stop
}

TEST_CASE("stop strings: character by character, overlapping stops, first to complete wins", "[unit][stop]") {
  const std::string text = "abcabd";
  std::vector<std::string> chars;
  for (char c : text) chars.emplace_back(1, c);
  auto out = Stream(chars, {"abd", "cab"});
  CHECK(out.text == "ab");  // "cab" completes at index 5, before "abd" at 6
  CHECK(out.matched == "cab");

  out = Stream({text}, {"abd", "cab"});
  CHECK(out.text == "ab");
  CHECK(out.matched == "cab");

  out = Stream(chars, {"bd"}, /*include=*/true);
  CHECK(out.text == "abcabd");
  out = Stream({"no stop here"}, {"zzz"});
  CHECK(out.text == "no stop here");
  CHECK_FALSE(out.stopped);
  out = Stream({"empty stop strings are ignored"}, {""});
  CHECK(out.text == "empty stop strings are ignored");
}

TEST_CASE("stop strings: multi-byte text is held back on character boundaries", "[unit][stop]") {
  StopStringMatcher matcher({"。結束"});
  CHECK(matcher.Add("你好。").text == "你好");
  CHECK(matcher.Add("結").text.empty());
  const auto result = matcher.Add("束了");
  CHECK(result.stopped);
  CHECK(result.text.empty());
  CHECK(matcher.Add("more").text.empty());
}

TEST_CASE("stop strings: before min_tokens a completed stop is text, one completed after it stops", "[unit][stop]") {
  StopStringMatcher matcher({"END"});
  // Still under min_tokens: "END" is released as text and the stream goes on.
  auto early = matcher.Add("one END two", /*may_stop=*/false);
  CHECK(early.text == "one END two");
  CHECK_FALSE(early.stopped);
  // A possible start is still held back under min_tokens...
  early = matcher.Add(" E", /*may_stop=*/false);
  CHECK(early.text == " ");
  CHECK_FALSE(early.stopped);
  // ...so a stop completed by the first token past min_tokens ends the stream there.
  const auto late = matcher.Add("ND three", /*may_stop=*/true);
  CHECK(late.stopped);
  CHECK(late.matched == "END");
  CHECK(late.text.empty());
  CHECK(matcher.Finish().empty());
}

}  // namespace
}  // namespace llmc::tokenizer
