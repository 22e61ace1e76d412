// The package manifest's optional fields, read straight from llmc-model.json files (no model.pt needed), and
// how the worker turns the output-format fields into what it parses with.
#include "worker/model/model_manifest.h"

#include <fstream>
#include <functional>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/support/byte_tokenizer.h"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_engine.h"
#include "worker/service/served_model.h"

namespace llmc::model {
namespace {

using typed_output::ToolCallFormat;

// A valid version 6 manifest with `edit` applied, in a fresh folder; the folder.
std::string WriteManifest(const std::function<void(nlohmann::json&)>& edit = {}) {
  nlohmann::json manifest = {
      {"format", "llmc-model"},
      {"format_version", 6},
      {"name", "tiny"},
      {"architecture", "qwen2"},
      {"dtype", "float32"},
      {"quantization", "none"},
      {"vocab_size", 512},
      {"hidden_size", 128},
      {"intermediate_size", 256},
      {"num_layers", 2},
      {"num_heads", 4},
      {"num_kv_heads", 2},
      {"head_dim", 32},
      {"max_context_length", 2048},
      {"chat_template", "chatml"},
      {"eos_token_ids", {2}},
      {"embedding_pooling", "last"},
  };
  if (edit) edit(manifest);
  const std::string dir = testing::MakeTempDir("llmc-manifest");
  std::ofstream(dir + "/" + kManifestFile) << manifest.dump(2);
  return dir;
}

TEST_CASE("manifest: tool_call_format and reasoning are read when present", "[unit][manifest]") {
  const auto manifest = ReadModelManifest(WriteManifest([](nlohmann::json& m) {
    m["tool_call_format"] = "hermes";
    m["reasoning"] = {{"start", "<think>"}, {"end", "</think>"}};
  }));
  REQUIRE(manifest.ok());
  CHECK(manifest->tool_call_format == "hermes");
  CHECK(manifest->reasoning_start == "<think>");
  CHECK(manifest->reasoning_end == "</think>");
  CHECK(manifest->embedding_pooling == "last");

  for (const char* name :
       {"none", "hermes", "qwen3_coder", "llama3_json", "pythonic", "mistral", "deepseek_v3", "deepseek_v31"}) {
    const auto each = ReadModelManifest(WriteManifest([name](nlohmann::json& m) { m["tool_call_format"] = name; }));
    REQUIRE(each.ok());
    CHECK(each->tool_call_format == name);
  }
}

TEST_CASE("manifest: packages without the output-format fields mean no tool calls and no reasoning",
          "[unit][manifest]") {
  const auto manifest = ReadModelManifest(WriteManifest());
  REQUIRE(manifest.ok());
  CHECK(manifest->tool_call_format == "none");
  CHECK(manifest->reasoning_start.empty());
  CHECK(manifest->reasoning_end.empty());

  // A null reasoning is none too; and version 5 packages load as before.
  const auto null_reasoning = ReadModelManifest(WriteManifest([](nlohmann::json& m) {
    m["reasoning"] = nullptr;
    m["format_version"] = 5;
    m.erase("embedding_pooling");
  }));
  REQUIRE(null_reasoning.ok());
  CHECK(null_reasoning->reasoning_end.empty());
}

TEST_CASE("manifest: an unknown tool-call format or malformed reasoning is refused, naming the field",
          "[unit][manifest]") {
  const auto error = [](const std::function<void(nlohmann::json&)>& edit) {
    const auto manifest = ReadModelManifest(WriteManifest(edit));
    REQUIRE_FALSE(manifest.ok());
    CHECK(manifest.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(manifest.status().message());
  };
  std::string message = error([](nlohmann::json& m) { m["tool_call_format"] = "qwen3_xml"; });
  CHECK_THAT(message, Catch::Contains("tool_call_format"));
  CHECK_THAT(message, Catch::Contains("'qwen3_xml'"));
  CHECK_THAT(message, Catch::Contains("deepseek_v31"));  // the known names are listed
  CHECK_THAT(error([](nlohmann::json& m) { m["tool_call_format"] = 3; }), Catch::Contains("'tool_call_format'"));
  CHECK_THAT(error([](nlohmann::json& m) { m["tool_call_format"] = ""; }), Catch::Contains("'tool_call_format'"));
  CHECK_THAT(error([](nlohmann::json& m) { m["reasoning"] = "think"; }), Catch::Contains("'reasoning' must be"));
  CHECK_THAT(error([](nlohmann::json& m) {
               m["reasoning"] = {{"start", "<think>"}};
             }),
             Catch::Contains("'reasoning.end' must be a non-empty string"));
  CHECK_THAT(error([](nlohmann::json& m) {
               m["reasoning"] = {{"start", ""}, {"end", "</think>"}};
             }),
             Catch::Contains("'reasoning.start' must be a non-empty string"));
}

TEST_CASE("manifest: the served model takes the package's formats unless the worker's parsers override them",
          "[unit][manifest]") {
  worker::ServedModel served;
  served.tool_call_format = ToolCallFormat::kHermes;
  served.reasoning = {"<think>", "</think>"};

  REQUIRE(worker::ApplyOutputFormatOverrides("auto", "auto", served).ok());
  CHECK(served.tool_call_format == ToolCallFormat::kHermes);
  CHECK(served.reasoning.enabled());

  REQUIRE(worker::ApplyOutputFormatOverrides("qwen3_coder", "none", served).ok());
  CHECK(served.tool_call_format == ToolCallFormat::kQwen3CoderXml);
  CHECK_FALSE(served.reasoning.enabled());

  REQUIRE(worker::ApplyOutputFormatOverrides("none", "think", served).ok());
  CHECK(served.tool_call_format == ToolCallFormat::kNone);
  CHECK(served.reasoning.start == "<think>");
  CHECK(served.reasoning.end == "</think>");

  absl::Status status = worker::ApplyOutputFormatOverrides("qwen3_xml", "auto", served);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("tool_call_parser"));
  status = worker::ApplyOutputFormatOverrides("auto", "deepseek_r1", served);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Catch::Contains("reasoning_parser"));

  // A package without the fields (the fake engine's manifest): no tool calls, no reasoning.
  testing::FakeEngine engine;
  const auto tokenizer = testing::MakeByteTokenizer();
  const worker::ServedModel plain = worker::MakeServedModel(engine, *tokenizer, "");
  CHECK(plain.tool_call_format == ToolCallFormat::kNone);
  CHECK_FALSE(plain.reasoning.enabled());
}

}  // namespace
}  // namespace llmc::model
