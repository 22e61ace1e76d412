#include "worker/tokenizer/chat_template.h"

#include "tests/support/catch.h"

namespace llmc::tokenizer {
namespace {

const std::vector<ChatTurn> kConversation = {
    {"system", "You are terse."}, {"user", "Hi!"}, {"assistant", "Hello."}, {"user", "2+2?"}};

std::string Render(const std::string& name, const std::vector<ChatTurn>& messages, bool generation_prompt = true) {
  auto chat_template = FindChatTemplate(name);
  REQUIRE(chat_template.ok());
  auto rendered = (*chat_template)->Render(messages, generation_prompt);
  REQUIRE(rendered.ok());
  return *rendered;
}

TEST_CASE("chat templates: golden renderings", "[unit][chat_template]") {
  CHECK(Render("chatml", kConversation) ==
        "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  CHECK(Render("chatml", {{"user", "Hi!"}}, false) == "<|im_start|>user\nHi!<|im_end|>\n");

  CHECK(Render("llama3", kConversation) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(Render("llama3", {{"user", "  padded \n"}}, false) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\npadded<|eot_id|>");

  CHECK(Render("llama2", kConversation) ==
        "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi! [/INST] Hello. </s><s>[INST] 2+2? [/INST]");
  CHECK(Render("llama2", {{"user", "Hi!"}}) == "<s>[INST] Hi! [/INST]");

  CHECK(Render("mistral", kConversation) == "<s>[INST] You are terse.\n\nHi! [/INST]Hello.</s>[INST] 2+2? [/INST]");
  CHECK(Render("mistral", {{"user", "Hi!"}}) == "<s>[INST] Hi! [/INST]");

  CHECK(Render("vicuna", kConversation) == "You are terse. USER: Hi! ASSISTANT: Hello.</s>USER: 2+2? ASSISTANT:");
  CHECK(Render("vicuna", {{"user", "Hi!"}}) ==
        "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
        "detailed, and polite answers to the user's questions. USER: Hi! ASSISTANT:");

  CHECK(Render("raw", {{"user", "Once upon"}, {"assistant", " a time"}}) == "Once upon a time");
}

TEST_CASE("chat templates: sequences a template cannot express are refused", "[unit][chat_template]") {
  const auto refuse = [](const std::string& name, const std::vector<ChatTurn>& messages, const std::string& why) {
    const auto rendered = FindChatTemplate(name).value()->Render(messages, true);
    INFO(name);
    REQUIRE_FALSE(rendered.ok());
    CHECK(rendered.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(rendered.status().message()), Catch::Contains(why));
  };
  for (const std::string name : {"llama2", "mistral", "vicuna"}) {
    refuse(name, {{"user", "a"}, {"user", "b"}}, "messages[1] must be a assistant message");
    refuse(name, {{"assistant", "a"}}, "messages[0] must be a user message");
    refuse(name, {{"system", "s"}}, "needs a user message");
  }
  for (const std::string name : {"chatml", "llama3", "llama2", "mistral", "vicuna", "raw"}) {
    refuse(name, {}, "messages must not be empty");
    refuse(name, {{"user", "a"}, {"system", "late"}}, "system message only first");
    refuse(name, {{"tool", "{}"}}, "role 'tool' is not supported");
  }
  const auto unknown = FindChatTemplate("jinja-thing");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(unknown.status().message()), Catch::Contains("chatml, llama3, llama2, mistral, vicuna, raw"));
}

}  // namespace
}  // namespace llmc::tokenizer
