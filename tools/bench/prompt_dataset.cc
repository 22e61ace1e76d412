#include "tools/bench/prompt_dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace llmc::bench {
namespace {

// Uniform integer in [len*(1-r), len*(1+r)], at least minimum.
int64_t DrawLength(std::mt19937_64& rng, int64_t len, double ratio, int64_t minimum) {
  const auto low = static_cast<int64_t>(std::floor(static_cast<double>(len) * (1.0 - ratio)));
  const auto high = static_cast<int64_t>(std::ceil(static_cast<double>(len) * (1.0 + ratio)));
  int64_t value = len;
  if (ratio > 0 && high > low) value = std::uniform_int_distribution<int64_t>(low, high)(rng);
  return std::max(value, minimum);
}

}  // namespace

const std::vector<std::string>& PromptWords() {
  static const std::vector<std::string> words = {
      "the",        "of",          "and",     "to",           "in",           "is",          "that",      "for",
      "it",         "as",          "was",     "with",         "be",           "by",          "on",        "not",
      "he",         "this",        "are",     "or",           "his",          "from",        "at",        "which",
      "but",        "have",        "an",      "they",         "you",          "were",        "her",       "she",
      "there",      "been",        "one",     "all",          "we",           "their",       "has",       "would",
      "when",       "if",          "so",      "no",           "will",         "more",        "what",      "up",
      "out",        "who",         "can",     "about",        "time",         "year",        "people",    "way",
      "day",        "man",         "thing",   "woman",        "life",         "child",       "world",     "school",
      "state",      "family",      "student", "group",        "country",      "problem",     "hand",      "part",
      "place",      "case",        "week",    "company",      "system",       "program",     "question",  "work",
      "government", "number",      "night",   "point",        "home",         "water",       "room",      "mother",
      "area",       "money",       "story",   "fact",         "month",        "lot",         "right",     "study",
      "book",       "eye",         "job",     "word",         "business",     "issue",       "side",      "kind",
      "head",       "house",       "service", "friend",       "father",       "power",       "hour",      "game",
      "line",       "end",         "member",  "law",          "car",          "city",        "community", "name",
      "team",       "minute",      "idea",    "kid",          "body",         "information", "back",      "parent",
      "face",       "others",      "level",   "office",       "door",         "health",      "person",    "art",
      "war",        "history",     "party",   "result",       "change",       "morning",     "reason",    "research",
      "girl",       "guy",         "moment",  "air",          "teacher",      "force",       "education", "foot",
      "boy",        "age",         "policy",  "music",        "market",       "sense",       "nation",    "plan",
      "college",    "interest",    "death",   "experience",   "effect",       "class",       "control",   "care",
      "field",      "development", "role",    "effort",       "rate",         "heart",       "drug",      "show",
      "leader",     "light",       "voice",   "wife",         "police",       "mind",        "price",     "report",
      "decision",   "son",         "view",    "relationship", "town",         "road",        "arm",       "difference",
      "value",      "building",    "action",  "model",        "season",       "society",     "tax",       "director",
      "position",   "player",      "record",  "paper",        "space",        "ground",      "form",      "event",
      "official",   "matter",      "center",  "couple",       "site",         "project",     "activity",  "star",
      "table",      "need",        "court",   "oil",          "situation",    "cost",        "industry",  "figure",
      "street",     "image",       "phone",   "data",         "picture",      "practice",    "piece",     "land",
      "product",    "doctor",      "wall",    "patient",      "worker",       "news",        "test",      "movie",
      "north",      "love",        "support", "technology",   "step",         "baby",        "computer",  "type",
      "attention",  "film",        "tree",    "source",       "organization", "hair",        "window",    "evidence",
  };
  return words;
}

std::vector<BenchPrompt> MakeRandomPrompts(const RandomDatasetOptions& options) {
  const std::vector<std::string>& words = PromptWords();
  const uint64_t base = words.size();
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
  std::vector<BenchPrompt> prompts;
  prompts.reserve(static_cast<size_t>(options.num_prompts));
  for (int64_t i = 0; i < options.num_prompts; ++i) {
    BenchPrompt prompt;
    prompt.input_len = DrawLength(rng, options.input_len, options.range_ratio, kUniquePrefixWords);
    prompt.output_len = DrawLength(rng, options.output_len, options.range_ratio, 1);
    // Four words for the run id (base 256), three for the index: unique for 16.7 million requests.
    std::vector<size_t> prefix;
    uint64_t run = options.run_id;
    for (int k = 0; k < 4; ++k, run /= base) prefix.push_back(run % base);
    uint64_t index = static_cast<uint64_t>(i);
    for (int k = 0; k < 3; ++k, index /= base) prefix.push_back(index % base);
    std::string text;
    for (int64_t w = 0; w < prompt.input_len; ++w) {
      const size_t word = w < kUniquePrefixWords ? prefix[static_cast<size_t>(w)] : pick(rng);
      if (w > 0) text.push_back(' ');
      text += words[word];
    }
    prompt.prompt = std::move(text);
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

Conversations MakeConversations(const RandomDatasetOptions& options, int32_t turns, int64_t shared_prefix_words) {
  RandomDatasetOptions messages = options;
  messages.num_prompts = options.num_prompts * std::max(turns, 1);
  Conversations conversations;
  conversations.prompts = MakeRandomPrompts(messages);
  for (size_t i = 0; i < conversations.prompts.size(); ++i) {
    conversations.prompts[i].conversation = static_cast<int64_t>(i) / std::max(turns, 1);
    conversations.prompts[i].turn = static_cast<int32_t>(static_cast<int64_t>(i) % std::max(turns, 1));
  }
  const std::vector<std::string>& words = PromptWords();
  std::mt19937_64 rng(options.seed ^ 0x73797374656dULL);
  std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
  for (int64_t w = 0; w < shared_prefix_words; ++w) {
    if (w > 0) conversations.system_prompt.push_back(' ');
    conversations.system_prompt += words[pick(rng)];
  }
  return conversations;
}

int64_t CountWords(const std::string& text) {
  int64_t count = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = absl::ascii_isspace(static_cast<unsigned char>(c));
    if (!space && !in_word) ++count;
    in_word = !space;
  }
  return count;
}

absl::StatusOr<std::vector<BenchPrompt>> LoadPromptsFile(const std::string& path, int64_t num_prompts,
                                                         int64_t default_output_len) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read prompts file '", path, "'"));
  std::vector<BenchPrompt> file_prompts;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string where = absl::StrCat(path, ":", line_number, ": ");
    const nlohmann::json entry = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (entry.is_discarded() || !entry.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "expected a JSON object"));
    }
    const auto prompt = entry.find("prompt");
    if (prompt == entry.end() || !prompt->is_string() || prompt->get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "\"prompt\" must be a non-empty string"));
    }
    BenchPrompt item;
    item.prompt = prompt->get<std::string>();
    item.input_len = CountWords(item.prompt);
    item.output_len = default_output_len;
    if (const auto output = entry.find("output_len"); output != entry.end() && !output->is_null()) {
      if (!output->is_number_integer() || output->get<int64_t>() < 1) {
        return absl::InvalidArgumentError(absl::StrCat(where, "\"output_len\" must be a positive integer"));
      }
      item.output_len = output->get<int64_t>();
    }
    file_prompts.push_back(std::move(item));
  }
  if (file_prompts.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  std::vector<BenchPrompt> prompts;
  prompts.reserve(static_cast<size_t>(num_prompts));
  for (int64_t i = 0; i < num_prompts; ++i)
    prompts.push_back(file_prompts[static_cast<size_t>(i) % file_prompts.size()]);
  return prompts;
}

}  // namespace llmc::bench
