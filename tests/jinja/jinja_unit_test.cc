// Properties of llmc::jinja that the jinja2 parity tests cannot show: load-time errors naming the
// construct and line, error kinds, render limits, and concurrent rendering.
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/civil_time.h"
#include "nlohmann/json.hpp"
#include "tests/support/catch.h"
#include "worker/jinja/template.h"

namespace llmc::jinja {
namespace {

absl::StatusOr<std::string> Render(const std::string& source,
                                   const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                                   const RenderOptions& options = RenderOptions()) {
  auto parsed = Template::Parse(source, ParseOptions());
  if (!parsed.ok()) return parsed.status();
  return (*parsed)->Render(context, options);
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST_CASE("unsupported constructs fail at load time naming the construct and line", "[unit][jinja]") {
  auto include = Template::Parse("line 1\n{% if x %}\n{% include 'a' %}{% endif %}", ParseOptions());
  REQUIRE(include.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Message(include.status()) == "unsupported tag 'include' at line 3");
  auto filter = Template::Parse("{{ x }}\n\n{{ x | nosuch }}", ParseOptions());
  CHECK(Message(filter.status()) == "unsupported filter 'nosuch' at line 3");
  auto test = Template::Parse("{% if x is nosuch %}{% endif %}", ParseOptions());
  CHECK(Message(test.status()) == "unsupported test 'nosuch' at line 1");
  auto recursive = Template::Parse("{% for x in y recursive %}{% endfor %}", ParseOptions());
  CHECK(Message(recursive.status()) == "unsupported recursive for loop at line 1");
  auto unclosed = Template::Parse("{% for x in y %}\n", ParseOptions());
  CHECK(unclosed.status().code() == absl::StatusCode::kInvalidArgument);
  auto not_utf8 = Template::Parse("\xff", ParseOptions());
  CHECK(not_utf8.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("raise_exception is an INVALID_ARGUMENT with exactly the template's message", "[unit][jinja]") {
  auto rendered = Render("a\n{{ raise_exception('Roles must alternate (' ~ n ~ ')') }}", {{"n", 2}});
  REQUIRE(rendered.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Message(rendered.status()) == "Roles must alternate (2)");
  CHECK(IsRaisedByTemplate(rendered.status()));
}

TEST_CASE("render errors name the line and are not mistaken for raise_exception", "[unit][jinja]") {
  auto rendered = Render("ok\n{{ 1 }}\n{{ missing.attribute }}");
  REQUIRE(rendered.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Message(rendered.status()) == "'missing' is undefined (line 3)");
  CHECK_FALSE(IsRaisedByTemplate(rendered.status()));
  auto type_error = Render("{{ 'a' + 1 }}");
  CHECK(Message(type_error.status()) == "unsupported operand type(s) for +: 'str' and 'int' (line 1)");
}

TEST_CASE("the context's members become variables", "[unit][jinja]") {
  const nlohmann::ordered_json context = {{"messages", {{{"role", "user"}, {"content", "hé"}}}},
                                          {"add_generation_prompt", true},
                                          {"bos_token", "<s>"},
                                          {"enable_thinking", false}};
  auto rendered = Render(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m['content'] }}{% endfor %}"
      "{% if add_generation_prompt %}|gen{% endif %}{% if enable_thinking is false %}|nothink{% endif %}",
      context);
  REQUIRE(rendered.ok());
  CHECK(*rendered == "<s>user:hé|gen|nothink");
}

TEST_CASE("strftime_now formats the time the options fix", "[unit][jinja]") {
  RenderOptions options;
  options.now = absl::FromCivil(absl::CivilSecond(2024, 7, 26, 13, 5, 9), absl::UTCTimeZone());
  options.time_zone = absl::UTCTimeZone();
  auto rendered = Render("{{ strftime_now('%d %b %Y %H:%M:%S') }}", nlohmann::ordered_json::object(), options);
  REQUIRE(rendered.ok());
  CHECK(*rendered == "26 Jul 2024 13:05:09");
}

TEST_CASE("runaway templates stop at the render limits", "[unit][jinja]") {
  RenderOptions options;
  options.limits.max_loop_iterations = 1000;
  auto loops = Render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                      nlohmann::ordered_json::object(), options);
  CHECK(loops.status().code() == absl::StatusCode::kResourceExhausted);

  options = RenderOptions();
  options.limits.max_output_bytes = 1000;
  auto output = Render("{% for i in range(1000) %}0123456789{% endfor %}", nlohmann::ordered_json::object(), options);
  CHECK(output.status().code() == absl::StatusCode::kResourceExhausted);
  auto doubling =
      Render("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
             nlohmann::ordered_json::object(), options);
  CHECK(doubling.status().code() == absl::StatusCode::kResourceExhausted);
  auto repeat = Render("{{ 'x' * 1000000000 }}", nlohmann::ordered_json::object(), options);
  CHECK(repeat.status().code() == absl::StatusCode::kResourceExhausted);
  // Found in review: an empty sequence repeated 2**63-1 times used to loop that many times.
  CHECK(Render("{{ '' * 9223372036854775807 }}{{ ([] * 9223372036854775807) | length }}").value() == "0");
  auto wide = Render("{{ 'x'.center(4611686018427387905) }}", nlohmann::ordered_json::object(), options);
  CHECK(wide.status().code() == absl::StatusCode::kResourceExhausted);
  // A format index past any integer type is a missing argument, not an exception.
  CHECK(Render("{{ '{99999999999999999999}'.format(1) }}").status().code() == absl::StatusCode::kInvalidArgument);

  auto recursion = Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  CHECK(recursion.status().code() == absl::StatusCode::kResourceExhausted);

  auto nesting = Render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}");
  CHECK(nesting.status().code() == absl::StatusCode::kResourceExhausted);

  options = RenderOptions();
  options.limits.max_steps = 10000;
  auto steps = Render("{% for i in range(100000) %}{{ i }}{% endfor %}", nlohmann::ordered_json::object(), options);
  CHECK(steps.status().code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("long operator and attribute chains are refused when parsing", "[unit][jinja]") {
  // A left-deep tree as deep as the chain is long would be evaluated and freed by recursion.
  std::string attributes = "{{ x";
  for (int i = 0; i < 100000; ++i) attributes += ".a";
  attributes += " }}";
  std::string sums = "{{ 1";
  for (int i = 0; i < 100000; ++i) sums += " + 1";
  sums += " }}";
  std::string filters = "{{ 'a'";
  for (int i = 0; i < 1000; ++i) filters += " | trim";
  filters += " }}";
  for (const std::string& source : {attributes, sums, filters}) {
    auto parsed = Template::Parse(source, ParseOptions());
    REQUIRE_FALSE(parsed.ok());
    CHECK_THAT(Message(parsed.status()), Catch::Contains("expression chain is too long"));
  }
  std::string fine = "{{ 1";
  for (int i = 0; i < 200; ++i) fine += " + 1";
  CHECK(Render(fine + " }}").value() == "201");
}

TEST_CASE("deeply nested template expressions are refused when parsing", "[unit][jinja]") {
  const std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  CHECK(Template::Parse(parens, ParseOptions()).status().code() == absl::StatusCode::kInvalidArgument);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 5000; ++i) ifs += "{% endif %}";
  CHECK(Template::Parse(ifs, ParseOptions()).status().code() == absl::StatusCode::kInvalidArgument);
  const std::string nots = "{{ " + [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "not ";
    return s;
  }() + "1 }}";
  CHECK(Template::Parse(nots, ParseOptions()).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a namespace cannot be stored inside a namespace", "[unit][jinja]") {
  auto rendered = Render("{% set ns = namespace(a=1) %}{% set ns.self = ns %}");
  CHECK(rendered.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("deeply nested contexts are refused", "[unit][jinja]") {
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 200; ++i) deep = nlohmann::ordered_json::array({deep});
  auto rendered = Render("{{ x }}", {{"x", deep}});
  CHECK(rendered.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("options without trim_blocks and lstrip_blocks keep the whitespace", "[unit][jinja]") {
  ParseOptions options;
  options.trim_blocks = false;
  options.lstrip_blocks = false;
  auto parsed = Template::Parse("  {% if true %}\nx\n  {% endif %}\n", options);
  REQUIRE(parsed.ok());
  auto rendered = (*parsed)->Render(nlohmann::ordered_json::object(), RenderOptions());
  REQUIRE(rendered.ok());
  CHECK(*rendered == "  \nx\n  ");
}

TEST_CASE("one template renders on many threads at once", "[unit][jinja]") {
  auto parsed = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}"
      "={{ ns.n }}",
      ParseOptions());
  REQUIRE(parsed.ok());
  const Template& compiled = **parsed;
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        nlohmann::ordered_json context = {{"messages", nlohmann::ordered_json::array()}};
        std::string expected;
        for (int k = 0; k <= (t + i) % 5; ++k) {
          context["messages"].push_back({{"content", std::to_string(t)}});
          expected += std::to_string(t);
        }
        expected += "=" + std::to_string((t + i) % 5 + 1);
        auto rendered = compiled.Render(context, RenderOptions());
        if (!rendered.ok() || *rendered != expected) ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int f : failures) CHECK(f == 0);
}

}  // namespace
}  // namespace llmc::jinja
