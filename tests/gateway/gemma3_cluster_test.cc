// A Gemma 3 network (gemma3_text: sliding and global layers, sandwich norms, the final softcap), exported in
// bfloat16 from a random-weight checkpoint in Hugging Face's layout with the real Gemma 3 vocabulary (262,208
// rows, tied) and its tokenizer_config.json beside it, served through the real controller, worker and gateway:
// chat rendered by Gemma's own Jinja template exactly as jinja2 renders it (a system message folded into the
// first user turn, assistant turns as "model"), a JSON Schema-constrained answer over Gemma's SentencePiece
// vocabulary, and streaming. The weights are random, so the checks are properties that hold for any weights.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"
#include "tests/support/cluster_http.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/http_client.h"
#include "tests/support/small_model.h"
#include "tests/support/tokenizer_files.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using nlohmann::ordered_json;

constexpr char kGemma3Model[] = "tiny-gemma3";
// Gemma3TextConfig's vocab_size (Gemma 3 4B, 12B and 27B): the tokenizer's 262,145 ids (<image_soft_token> is
// 262144) and unused rows past them, which no constraint may let through.
constexpr int kVocabSize = 262208;

std::string TokenizerDir() { return std::filesystem::path(TokenizerJsonPath("gemma3")).parent_path().string(); }

// tests/python/make_family_fixture.py: the gemma3 checkpoint with Gemma 3's tokenizer files, exported.
std::string Gemma3Package() {
  const std::string out = MakeTempDir("llmc-gemma3-cluster");
  const CommandResult result = RunCommand(
      LLMC_PYTHON,
      {std::string(LLMC_SOURCE_DIR) + "/tests/python/make_family_fixture.py", "gemma3", "--out", out, "--dtype",
       "bfloat16", "--head", "tied", "--vocab-size", std::to_string(kVocabSize), "--bos-token-id", "2",
       "--eos-token-id", "1", "--tokenizer-dir", TokenizerDir(), "--name", kGemma3Model, "--no-reference"},
      absl::Seconds(240));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return out + "/package";
}

ordered_json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  INFO("cannot read " << path);
  REQUIRE(in.good());
  return ordered_json::parse(in);
}

// Gemma 3's chat template, from the tokenizer_config.json the exporter read (not the package's copy), rendered
// with add_generation_prompt by jinja2 set up as transformers sets it up (tests/jinja/render_reference.py),
// with the special tokens the package declares.
std::string RenderWithJinja2(const ordered_json& messages) {
  const ordered_json tokenizer_config = ReadJsonFile(TokenizerDir() + "/tokenizer_config.json");
  const ordered_json context = {{"bos_token", "<bos>"},         {"eos_token", "<end_of_turn>"}, {"unk_token", "<unk>"},
                                {"pad_token", "<pad>"},         {"messages", messages},         {"tools", nullptr},
                                {"add_generation_prompt", true}};
  const ordered_json cases =
      ordered_json::array({{{"template", tokenizer_config["chat_template"]}, {"context", context}}});
  const std::string path = MakeTempDir("llmc-gemma3-jinja2") + "/cases.json";
  std::ofstream(path) << cases.dump();
  const CommandResult result =
      RunCommand(LLMC_PYTHON, {std::string(LLMC_SOURCE_DIR) + "/tests/jinja/render_reference.py", path});
  INFO("render_reference.py (needs python3-jinja2): " << result.output);
  REQUIRE(result.exit_code == 0);
  const ordered_json rendered = ordered_json::parse(result.output);
  REQUIRE(rendered.size() == 1);
  REQUIRE(rendered[0]["ok"] == true);
  return rendered[0]["output"].get<std::string>();
}

ordered_json PostGemma3Ok(int port, const std::string& path, const ordered_json& body) {
  const HttpReply reply = PostJson(port, path, body.dump());
  INFO(path << " " << body.dump().substr(0, 600) << " -> " << reply.status << " " << reply.error << " "
            << reply.body.substr(0, 1200));
  REQUIRE(reply.status == 200);
  return ordered_json::parse(reply.body);
}

ordered_json Gemma3Chat(const ordered_json& messages, int max_tokens) {
  return {{"model", kGemma3Model},
          {"messages", messages},
          {"max_tokens", max_tokens},
          {"ignore_eos", true},
          {"temperature", 0}};
}

// The chunks of a streamed chat answer, checked for the stream's shape; fills `text` with the deltas' content
// joined and `finish_reason` with the one the last choice chunk gives.
std::vector<ordered_json> StreamedChunks(int port, const ordered_json& body, std::string& text,
                                         std::string& finish_reason) {
  SseClient client(port, kChatPath, body.dump());
  REQUIRE(client.status() == 200);
  CHECK_THAT(client.Header("Content-Type"), Catch::StartsWith("text/event-stream"));
  const std::vector<std::string> events = client.ReadAll(absl::Seconds(60));
  INFO("error: " << client.error() << " raw: " << client.raw().substr(0, 2000));
  CHECK(client.complete());
  CHECK(client.framing_errors().empty());
  REQUIRE(events.size() >= 2);
  CHECK(events.back() == "[DONE]");
  std::vector<ordered_json> chunks;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const ordered_json chunk = ordered_json::parse(events[i], nullptr, /*allow_exceptions=*/false);
    REQUIRE(!chunk.is_discarded());
    REQUIRE_FALSE(chunk.contains("error"));
    CHECK(chunk["object"] == "chat.completion.chunk");
    CHECK(chunk["model"] == kGemma3Model);
    CHECK(chunk["id"] == ordered_json::parse(events[0])["id"]);
    for (const ordered_json& choice : chunk["choices"]) {
      CHECK(choice["index"] == 0);
      const ordered_json& delta = choice["delta"];
      if (delta.contains("content") && delta["content"].is_string()) text += delta["content"].get<std::string>();
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
        finish_reason = choice["finish_reason"].get<std::string>();
      }
    }
    chunks.push_back(chunk);
  }
  REQUIRE(!chunks.empty());
  REQUIRE(!chunks[0]["choices"].empty());
  CHECK(chunks[0]["choices"][0]["delta"]["role"] == "assistant");
  return chunks;
}

TEST_CASE(
    "gemma3 e2e: a Gemma 3 network with the Gemma 3 tokenizer renders chat with its template, "
    "answers a JSON Schema and streams",
    "[integration][gateway][jinja]") {
  const std::string package = Gemma3Package();
  const ordered_json manifest = ReadJsonFile(package + "/llmc-model.json");
  CHECK(manifest["architecture"] == "gemma3");
  CHECK(manifest["dtype"] == "bfloat16");
  CHECK(manifest["vocab_size"] == kVocabSize);
  CHECK(manifest["tie_word_embeddings"] == true);
  CHECK(manifest["bos_token_id"] == 2);
  // <eos> from config.json and <end_of_turn> from generation_config.json.
  CHECK(manifest["eos_token_ids"].get<std::set<int>>() == std::set<int>{1, 106});
  CHECK(manifest["special_tokens"]["bos_token"] == "<bos>");
  CHECK(manifest["special_tokens"]["eos_token"] == "<end_of_turn>");
  CHECK(manifest["chat_template_file"] == "chat_template.jinja");
  CHECK(manifest["tool_call_format"] == "none");

  const tokenizer::Tokenizer& gemma = RealTokenizer("gemma3");
  REQUIRE(gemma.Encode("<bos>").value() == std::vector<int32_t>{2});
  REQUIRE(gemma.Encode("<end_of_turn>").value() == std::vector<int32_t>{106});

  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, package, SmallWorkerArgs(controller.address(), "gemma3-worker"));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(), {"--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());
  const int port = gateway.port();

  const ordered_json question =
      ordered_json::array({{{"role", "user"}, {"content", "What is the capital of France?"}}});

  {  // A chat completion in the OpenAI shape.
    const ordered_json plain = PostGemma3Ok(port, kChatPath, Gemma3Chat(question, 8));
    CHECK(plain["object"] == "chat.completion");
    CHECK(plain["id"].is_string());
    CHECK(plain["created"].is_number_integer());
    CHECK(plain["model"] == kGemma3Model);
    REQUIRE(plain["choices"].size() == 1);
    const ordered_json& choice = plain["choices"][0];
    CHECK(choice["index"] == 0);
    CHECK(choice["message"]["role"] == "assistant");
    CHECK(choice["message"]["content"].is_string());
    CHECK(choice["finish_reason"] == "length");
    CHECK(plain["usage"]["completion_tokens"] == 8);
    CHECK(plain["usage"]["total_tokens"] ==
          plain["usage"]["prompt_tokens"].get<int>() + plain["usage"]["completion_tokens"].get<int>());

    // The same request streamed: the same greedy text in chunks, then the usage.
    ordered_json streamed = Gemma3Chat(question, 8);
    streamed["stream"] = true;
    streamed["stream_options"] = {{"include_usage", true}};
    std::string text, finish_reason;
    const std::vector<ordered_json> chunks = StreamedChunks(port, streamed, text, finish_reason);
    CHECK(text == choice["message"]["content"]);
    CHECK(finish_reason == "length");
    const ordered_json& last = chunks.back();
    CHECK(last["choices"].empty());
    for (const char* field : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
      CHECK(last["usage"][field] == plain["usage"][field]);
    }
  }

  {  // The prompt is Gemma's template as jinja2 renders it, tokenized with Gemma's vocabulary.
    const ordered_json system_first = ordered_json::array(
        {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "  Hello there!\n"}}});
    const ordered_json conversation = ordered_json::array({{{"role", "system"}, {"content", "Answer in French."}},
                                                           {{"role", "user"}, {"content", "Hi"}},
                                                           {{"role", "assistant"}, {"content", "Bonjour !"}},
                                                           {{"role", "user"}, {"content", "Ça va ? 👋"}}});
    const ordered_json parts = ordered_json::array(
        {{{"role", "user"},
          {"content",
           ordered_json::array({{{"type", "text"}, {"text", "Describe "}}, {{"type", "text"}, {"text", "it."}}})}}});
    // The system text folded into the first user turn, assistant turns as "model", contents trimmed.
    CHECK(RenderWithJinja2(system_first) ==
          "<bos><start_of_turn>user\nYou are terse.\n\nHello there!<end_of_turn>\n<start_of_turn>model\n");
    CHECK(RenderWithJinja2(conversation) ==
          "<bos><start_of_turn>user\nAnswer in French.\n\nHi<end_of_turn>\n<start_of_turn>model\nBonjour "
          "!<end_of_turn>\n<start_of_turn>user\nÇa va ? 👋<end_of_turn>\n<start_of_turn>model\n");
    for (const ordered_json& messages : {question, system_first, conversation, parts}) {
      const std::string rendered = RenderWithJinja2(messages);
      INFO("messages: " << messages.dump() << "\njinja2: " << ordered_json(rendered).dump());
      const std::vector<int32_t> expected = gemma.Encode(rendered).value();
      REQUIRE(expected.front() == 2);  // one <bos>, the template's
      CHECK(std::count(expected.begin(), expected.end(), 2) == 1);
      const ordered_json tokenized = PostGemma3Ok(port, "/tokenize", {{"model", kGemma3Model}, {"messages", messages}});
      CHECK(tokenized["tokens"].get<std::vector<int32_t>>() == expected);
      CHECK(tokenized["count"] == expected.size());
      const ordered_json answer = PostGemma3Ok(port, kChatPath, Gemma3Chat(messages, 2));
      CHECK(answer["usage"]["prompt_tokens"] == expected.size());
      CHECK(answer["usage"]["completion_tokens"] == 2);
    }

    // Turns that do not alternate: the template's own error, a 400.
    ordered_json repeated = question;
    repeated.push_back({{"role", "user"}, {"content", "And of Peru?"}});
    const HttpReply raised = PostJson(port, kChatPath, Gemma3Chat(repeated, 2).dump());
    CHECK(raised.status == 400);
    CHECK_THAT(raised.body, Catch::Contains("roles must alternate"));
  }

  {  // A JSON Schema answer over Gemma's vocabulary parses and validates, streamed too.
    const ordered_json schema = {{"type", "object"},
                                 {"properties",
                                  {{"city", {{"type", "string"}, {"enum", {"Paris", "Lima", "Oslo"}}}},
                                   {"sunny", {{"type", "boolean"}}},
                                   {"note", {{"type", "string"}, {"maxLength", 8}}}}},
                                 {"required", {"city", "sunny", "note"}},
                                 {"additionalProperties", false}};
    ordered_json body = {
        {"model", kGemma3Model},
        {"messages", question},
        {"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "weather"}, {"strict", true}, {"schema", schema}}}}},
        {"max_tokens", 64},
        {"temperature", 0}};
    const ordered_json answer = PostGemma3Ok(port, kChatPath, body);
    INFO(answer.dump());
    const ordered_json& choice = answer["choices"][0];
    CHECK(choice["finish_reason"] == "stop");
    const std::string content = choice["message"]["content"].get<std::string>();
    const ordered_json parsed = ordered_json::parse(content, nullptr, /*allow_exceptions=*/false);
    REQUIRE(!parsed.is_discarded());
    REQUIRE(parsed.is_object());
    CHECK(parsed.size() == 3);
    REQUIRE(parsed.contains("city"));
    CHECK(std::set<std::string>{"Paris", "Lima", "Oslo"}.count(parsed["city"].get<std::string>()) == 1);
    REQUIRE(parsed.contains("sunny"));
    CHECK(parsed["sunny"].is_boolean());
    REQUIRE(parsed.contains("note"));
    REQUIRE(parsed["note"].is_string());
    // maxLength counts code points.
    const std::string note = parsed["note"].get<std::string>();
    CHECK(std::count_if(note.begin(), note.end(),
                        [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }) <= 8);

    body["stream"] = true;
    std::string text, finish_reason;
    StreamedChunks(port, body, text, finish_reason);
    CHECK(text == content);
    CHECK(finish_reason == "stop");
  }
}

}  // namespace
}  // namespace llmc::testing
