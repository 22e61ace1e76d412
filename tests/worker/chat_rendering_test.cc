// How the worker turns a chat request into prompt text: the request's template, the model's Jinja
// template, or its built-in one, and the errors each gives.
#include "worker/service/chat_rendering.h"

#include <catch2/catch.hpp>

#include "worker/jinja/template.h"

namespace llmc::worker {
namespace {

constexpr char kModelTemplate[] =
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
    "{% if tools %}[tools: {{ tools | map(attribute='function.name') | join(',') }}]{% endif %}"
    "{% if enable_thinking is defined and not enable_thinking %}[no-think]{% endif %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}";

ServedModel JinjaModel() {
  ServedModel model;
  model.info.set_name("jinja-model");
  auto parsed = jinja::Template::Parse(kModelTemplate, {});
  REQUIRE(parsed.ok());
  model.jinja_template = std::move(*parsed);
  model.special_tokens["bos_token"] = "<s>";
  model.trust_request_chat_template = true;
  return model;
}

v1::ChatInput Input(const std::string& messages_json) {
  v1::ChatInput chat;
  chat.set_messages_json(messages_json);
  return chat;
}

TEST_CASE("chat rendering: the model's Jinja template sees messages, tools, kwargs and special tokens",
          "[unit][worker][jinja]") {
  const ServedModel model = JinjaModel();
  v1::ChatInput chat = Input(R"([{"role":"user","content":"hi"}])");
  CHECK(RenderChat(chat, model).value() == "<s><user>hi</user><assistant>");
  chat.set_add_generation_prompt(false);
  chat.set_tools_json(R"([{"type":"function","function":{"name":"get_weather"}}])");
  chat.set_chat_template_kwargs_json(R"({"enable_thinking": false, "messages": "ignored"})");
  CHECK(RenderChat(chat, model).value() == "<s><user>hi</user>[tools: get_weather][no-think]");
}

TEST_CASE("chat rendering: a request's own template wins, and its errors are INVALID_ARGUMENT",
          "[unit][worker][jinja]") {
  const ServedModel model = JinjaModel();
  v1::ChatInput chat = Input(R"([{"role":"user","content":"hi"}])");
  chat.set_chat_template("{{ messages[0].content | upper }}");
  CHECK(RenderChat(chat, model).value() == "HI");
  ServedModel untrusting = JinjaModel();
  untrusting.trust_request_chat_template = false;
  CHECK_THAT(std::string(RenderChat(chat, untrusting).status().message()),
             Catch::Contains("--trust_request_chat_template"));

  chat.set_chat_template("{{ raise_exception('Only user turns, please') }}");
  auto raised = RenderChat(chat, model);
  REQUIRE_FALSE(raised.ok());
  CHECK(raised.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(raised.status().message() == "Only user turns, please");

  chat.set_chat_template("{% include 'other.jinja' %}");
  auto unsupported = RenderChat(chat, model);
  CHECK(unsupported.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(unsupported.status().message()),
             Catch::Contains("chat_template: ") && Catch::Contains("include"));

  // A runaway template hits a render limit; that is still the request's fault, never a retryable 429.
  chat.set_chat_template("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}");
  auto runaway = RenderChat(chat, model);
  CHECK(runaway.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(runaway.status().message()), Catch::StartsWith("chat template: "));
}

TEST_CASE("chat rendering: built-in templates take text parts and refuse tools", "[unit][worker][jinja]") {
  ServedModel model;
  model.info.set_name("builtin-model");
  model.chat_template = tokenizer::FindChatTemplate("chatml").value();
  v1::ChatInput chat = Input(R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}])");
  CHECK(RenderChat(chat, model).value() == "<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n");
  chat.set_tools_json(R"([{"type":"function","function":{"name":"f"}}])");
  auto refused = RenderChat(chat, model);
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("built-in 'chatml' template"));

  CHECK(RenderChat(Input("{not json"), model).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(RenderChat(Input(R"({"role":"user"})"), model).status().code() == absl::StatusCode::kInvalidArgument);
  ServedModel none;
  none.info.set_name("bare");
  CHECK_THAT(std::string(RenderChat(Input(R"([{"role":"user","content":"x"}])"), none).status().message()),
             Catch::Contains("has no chat template"));
}

TEST_CASE("chat rendering: content parts become a string unless the template loops over them",
          "[unit][worker][jinja]") {
  ServedModel model = JinjaModel();
  const v1::ChatInput chat =
      Input(R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}])");
  // kModelTemplate prints m.content: it expects a string.
  CHECK(RenderChat(chat, model).value() == "<s><user>a\nb</user><assistant>");
  CHECK(TemplateReadsContentParts("{% for part in message['content'] %}{{ part.text }}{% endfor %}"));
  CHECK(TemplateReadsContentParts("{%- for item in m.content -%}x{%- endfor -%}"));
  CHECK_FALSE(TemplateReadsContentParts(kModelTemplate));
  v1::ChatInput own = chat;
  own.set_chat_template("{% for m in messages %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endfor %}");
  CHECK(RenderChat(own, model).value() == "[a][b]");
}

}  // namespace
}  // namespace llmc::worker
