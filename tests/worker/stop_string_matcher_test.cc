#include "worker/tokenizer/stop_string_matcher.h"

#include <random>

#include "common/request_limits.h"
#include "tests/support/catch.h"

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

// The matcher as it was before the automaton, kept as the reference: after each chunk, the stop string
// whose first occurrence in the unreleased text ends first (the longest at a tie) stops the stream; else
// the longest suffix that is a proper prefix of a stop string is held back.
Streamed Reference(const std::vector<std::string>& chunks, const std::vector<std::string>& stops, bool include) {
  Streamed out;
  std::string held;
  for (const auto& chunk : chunks) {
    held += chunk;
    size_t best_start = std::string::npos, best_end = std::string::npos;
    const std::string* best = nullptr;
    for (const auto& stop : stops) {
      const size_t start = held.find(stop);
      if (start == std::string::npos) continue;
      const size_t end = start + stop.size();
      if (end < best_end || (end == best_end && start < best_start)) {
        best_start = start;
        best_end = end;
        best = &stop;
      }
    }
    if (best != nullptr) {
      out.text += held.substr(0, include ? best_end : best_start);
      out.stopped = true;
      out.matched = *best;
      return out;
    }
    size_t keep = 0;
    for (const auto& stop : stops) {
      for (size_t length = std::min(stop.size() - 1, held.size()); length > keep; --length) {
        if (held.compare(held.size() - length, length, stop, 0, length) == 0) {
          keep = length;
          break;
        }
      }
    }
    out.text += held.substr(0, held.size() - keep);
    held.erase(0, held.size() - keep);
  }
  out.text += held;
  return out;
}

TEST_CASE("stop strings: the automaton agrees with the direct search on random text and chunks", "[unit][stop]") {
  std::mt19937 rng(44);
  const auto random_string = [&](size_t max_length) {
    std::string s(1 + rng() % max_length, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng() % 3);
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    for (size_t k = 1 + rng() % 4; k > 0; --k) stops.push_back(random_string(5));
    const std::string text = random_string(40);
    std::vector<std::string> chunks;
    for (size_t at = 0; at < text.size();) {
      const size_t length = std::min<size_t>(rng() % 5, text.size() - at);  // empty chunks too
      chunks.push_back(text.substr(at, length));
      at += length;
    }
    const bool include = trial % 2 == 1;
    const Streamed expected = Reference(chunks, stops, include);
    const Streamed got = Stream(chunks, stops, include);
    INFO("text " << text << ", trial " << trial);
    CHECK(got.text == expected.text);
    CHECK(got.stopped == expected.stopped);
    CHECK(got.matched == expected.matched);
  }
}

TEST_CASE("stop strings: adversarial text at the caps costs work linear in its length", "[unit][stop]") {
  // The most stop strings of the longest length, each 'a'... then one other byte: every 'a' of a long run
  // of them extends a prefix of all of them (the direct search rescanned the held-back 511 bytes for each
  // of the 16 strings on every token).
  std::vector<std::string> stops;
  for (int64_t i = 0; i < limits::kMaxStopStrings; ++i) {
    stops.push_back(std::string(limits::kMaxStopStringBytes - 1, 'a') + static_cast<char>('b' + i));
  }
  // Runs of 'a' broken by a byte that matches nothing: each break follows the failure links all the way down.
  std::string text;
  while (text.size() < 200000) text += std::string(limits::kMaxStopStringBytes - 1, 'a') + "z";
  text += std::string(3000, 'a');
  for (const size_t chunk_size : {size_t{1}, size_t{3}, size_t{64}, text.size()}) {
    StopStringMatcher matcher(stops);
    std::string released;
    for (size_t at = 0; at < text.size(); at += chunk_size) {
      const auto result = matcher.Add(absl::string_view(text).substr(at, chunk_size));
      REQUIRE_FALSE(result.stopped);
      released += result.text;
    }
    INFO("chunks of " << chunk_size << ": work " << matcher.work() << " for " << text.size() << " bytes");
    // The last 511 bytes might still begin a stop string.
    CHECK(released.size() == text.size() - (limits::kMaxStopStringBytes - 1));
    CHECK(matcher.work() <= 4 * text.size());
    CHECK(released + matcher.Finish() == text);
  }
  // The stop at the end of such a run is still found, whatever came before.
  StopStringMatcher matcher(stops);
  for (size_t at = 0; at < text.size(); at += 1000) matcher.Add(absl::string_view(text).substr(at, 1000));
  const auto result = matcher.Add("c");
  CHECK(result.stopped);
  CHECK(result.matched == stops[1]);
  CHECK(result.text.empty());
}

TEST_CASE("stop strings: copies of a matcher go on independently", "[unit][stop]") {
  StopStringMatcher first({"abc", "xyz"});
  CHECK(first.Add("1 ab").text == "1 ");
  StopStringMatcher second = first;
  const auto stopped = first.Add("c");
  CHECK(stopped.stopped);
  CHECK(stopped.matched == "abc");
  const auto going_on = second.Add("d xy");
  CHECK_FALSE(going_on.stopped);
  CHECK(going_on.text == "abd ");
  CHECK(second.Add("z").matched == "xyz");
}

}  // namespace
}  // namespace llmc::tokenizer
