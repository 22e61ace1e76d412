// How the worker turns a chat request into prompt text: the request's template, the model's Jinja
// template, or its built-in one, and the errors each gives.
#include "worker/service/chat_rendering.h"

#include <iterator>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"
#include "tests/support/catch.h"
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

TEST_CASE("chat rendering: the content-parts check is linear and accepts what the pattern did",
          "[unit][worker][jinja]") {
  // What {%-?\s*for\s+[\w, ]+\s+in\s+[^%]*content (std::regex, searched) accepted and refused.
  CHECK(TemplateReadsContentParts("x{%for a in content"));
  CHECK(TemplateReadsContentParts("{%-\n\tfor  k, v  in\tmessage.content_parts %}"));
  CHECK(TemplateReadsContentParts("{% {% for x in y.content"));
  CHECK(TemplateReadsContentParts("{%- for a,b in c %}{% for p in m['content'] %}"));
  CHECK_FALSE(TemplateReadsContentParts("{% for in content"));      // no loop variable
  CHECK_FALSE(TemplateReadsContentParts("{% for x in %content"));   // a % before content
  CHECK_FALSE(TemplateReadsContentParts("{% for x.y in content"));  // '.' is not in the variable list
  CHECK_FALSE(TemplateReadsContentParts("{%-- for x in content"));
  CHECK(TemplateReadsContentParts("{%  for\tx\tin content"));
  CHECK(TemplateReadsContentParts("{% for in in content"));  // "in" as the loop variable
  CHECK(TemplateReadsContentParts("{% for   in content"));   // spaces as the variable list, as before

  // Against std::regex itself, on short texts made of the pattern's pieces.
  const std::regex pattern(R"(\{%-?\s*for\s+[\w, ]+\s+in\s+[^%]*content)");
  const char* const pieces[] = {"{%", "{% for ", "-",   " ", "\t", "\n",   "for",  "in", "content", "cont",
                                "x",  ",",       "a b", "%", "_",  " in ", "for ", "\v", " x in ",  "\f"};
  std::mt19937 random(44);
  int matches = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    for (size_t n = random() % 12; n > 0; --n) text += pieces[random() % std::size(pieces)];
    const bool expected = std::regex_search(text, pattern);
    matches += expected;
    if (TemplateReadsContentParts(text) != expected) FAIL("differs from std::regex on '" << text << "'");
  }
  CHECK(matches > 20);

  // Texts on which std::regex recursed once per byte (a stack overflow in a worker loading a package or
  // rendering a request's template): a long run of [^%]* after an open loop, a long variable list, many
  // open loops. Each is one pass now.
  const std::string run(8 << 20, 'a');
  CHECK_FALSE(TemplateReadsContentParts("{% for x in " + run));
  CHECK(TemplateReadsContentParts("{% for x in " + run + "content"));
  CHECK_FALSE(TemplateReadsContentParts("{% for " + std::string(4 << 20, ' ') + "in x"));
  std::string loops;
  for (int i = 0; i < 200000; ++i) loops += "{% for a in b ";
  CHECK_FALSE(TemplateReadsContentParts(loops));
  CHECK(TemplateReadsContentParts(loops + "content"));
}

TEST_CASE("chat rendering: JSON fields from gRPC meet the gateway's depth and key limits", "[unit][worker][jinja]") {
  const ServedModel model = JinjaModel();
  const auto refusal = [&](const v1::ChatInput& chat) {
    absl::StatusOr<std::string> text = RenderChat(chat, model);
    REQUIRE_FALSE(text.ok());
    CHECK(text.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(text.status().message());
  };
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string many_keys = "{";
  for (int i = 0; i <= 10000; ++i) absl::StrAppend(&many_keys, i == 0 ? "" : ",", "\"k", i, "\":0");
  many_keys += "}";

  v1::ChatInput deep_messages = Input("[{\"role\":\"user\",\"content\":" + deep + "}]");
  CHECK(refusal(deep_messages) == "chat.messages_json nests JSON deeper than 69 levels");
  v1::ChatInput wide_messages = Input("[{\"role\":\"user\",\"content\":\"hi\",\"x\":" + many_keys + "}]");
  CHECK(refusal(wide_messages) == "chat.messages_json has a JSON object with more than 10000 keys");

  v1::ChatInput chat = Input(R"([{"role":"user","content":"hi"}])");
  v1::ChatInput deep_tools = chat;
  deep_tools.set_tools_json(deep);
  CHECK(refusal(deep_tools) == "chat.tools_json nests JSON deeper than 64 levels");
  v1::ChatInput wide_kwargs = chat;
  wide_kwargs.set_chat_template_kwargs_json(many_keys);
  CHECK(refusal(wide_kwargs) == "chat.chat_template_kwargs_json has a JSON object with more than 10000 keys");
  v1::ChatInput deep_kwargs = chat;
  deep_kwargs.set_chat_template_kwargs_json("{\"a\":" + deep + "}");
  CHECK(refusal(deep_kwargs) == "chat.chat_template_kwargs_json nests JSON deeper than 64 levels");

  // Up to the limits, as the gateway: accepted.
  v1::ChatInput fine = chat;
  fine.set_chat_template_kwargs_json("{\"a\":" + std::string(62, '[') + "1" + std::string(62, ']') + "}");
  CHECK(RenderChat(fine, model).ok());
  v1::ChatInput fine_messages =
      Input("[{\"role\":\"user\",\"content\":\"hi\",\"x\":" + std::string(62, '[') + "1" + std::string(62, ']') + "}]");
  CHECK(RenderChat(fine_messages, model).ok());
  // A tool call's arguments the gateway accepted (64 levels inside their string) sit five levels down in the
  // forwarded messages (found by fuzz/json_in_strings_fuzzer.cc).
  const std::string deepest_arguments = std::string(63, '[') + "{}" + std::string(63, ']');
  v1::ChatInput call_messages = Input(R"([{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function",)"
                                      R"("function":{"name":"f","arguments":)" +
                                      deepest_arguments + "}}]}]");
  const absl::StatusOr<std::string> rendered_call = RenderChat(call_messages, model);
  CHECK(rendered_call.status() == absl::OkStatus());
  // nlohmann's parser ends its input at a NUL byte: what follows one would be dropped unseen.
  v1::ChatInput nul_kwargs = chat;
  nul_kwargs.set_chat_template_kwargs_json(std::string("{\"a\":1}\0{", 9));
  CHECK(refusal(nul_kwargs) == "chat.chat_template_kwargs_json is not valid JSON: it holds a NUL byte at offset 7");
}

}  // namespace
}  // namespace llmc::worker
