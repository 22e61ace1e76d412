// The worker's constraint compiler: every kind compiles into a grammar over the tokenizer's vocabulary, the
// cache hands back the same automaton, refusals name the field the request used (cached ones too), and the
// asynchronous path answers every caller.
#include "worker/service/constraint_compiler.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "tests/support/byte_tokenizer.h"
#include "tests/support/catch.h"
#include "worker/grammar/matcher.h"

namespace llmc::worker {
namespace {

TEST_CASE("constraint compiler: each kind compiles, the cache returns the same grammar", "[unit]") {
  const auto tokenizer = testing::MakeByteTokenizer();
  ConstraintCompiler compiler(*tokenizer, {testing::kImEnd});
  v1::OutputConstraint regex;
  regex.set_regex("[ab]{2}");
  regex.set_source("guided_regex");
  const absl::StatusOr<engine::OutputConstraint> first = compiler.CompileNow(regex);
  REQUIRE(first.ok());
  grammar::GrammarMatcher matcher(first->grammar, first->vocabulary);
  CHECK(matcher.AcceptToken('a'));
  CHECK_FALSE(matcher.AcceptToken(testing::kImEnd));
  CHECK_FALSE(matcher.AcceptToken('c'));
  CHECK(matcher.AcceptToken('b'));
  CHECK(matcher.AcceptToken(testing::kImEnd));
  CHECK(matcher.IsTerminated());
  // The source field is not part of the cache key.
  regex.set_source("structured_outputs.regex");
  const absl::StatusOr<engine::OutputConstraint> again = compiler.CompileNow(regex);
  REQUIRE(again.ok());
  CHECK(again->grammar == first->grammar);
  CHECK(again->vocabulary == first->vocabulary);

  v1::OutputConstraint choice;
  choice.mutable_choice()->add_choices("yes");
  choice.mutable_choice()->add_choices("no");
  CHECK(compiler.CompileNow(choice).ok());
  v1::OutputConstraint gbnf;
  gbnf.set_grammar("root ::= \"x\" [0-9]+");
  CHECK(compiler.CompileNow(gbnf).ok());
  v1::OutputConstraint object;
  object.set_json_object(true);
  CHECK(compiler.CompileNow(object).ok());
  v1::OutputConstraint schema;
  schema.set_json_schema(R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}})");
  const absl::StatusOr<engine::OutputConstraint> compiled = compiler.CompileNow(schema);
  REQUIRE(compiled.ok());
  grammar::GrammarMatcher ordered(compiled->grammar, nullptr);
  CHECK(ordered.AcceptBytes(R"({"b":1,"a":"x"})"));
  CHECK(ordered.CanEnd());
}

TEST_CASE("constraint compiler: refusals name the request's field, also from the cache", "[unit]") {
  const auto tokenizer = testing::MakeByteTokenizer();
  ConstraintCompiler compiler(*tokenizer, {testing::kImEnd});
  v1::OutputConstraint schema;
  schema.set_json_schema(R"({"type":"array","uniqueItems":true})");
  schema.set_source("response_format");
  absl::StatusOr<engine::OutputConstraint> refused = compiler.CompileNow(schema);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::StartsWith("response_format: "));
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("'uniqueItems'"));
  schema.set_source("guided_json");
  refused = compiler.CompileNow(schema);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Catch::StartsWith("guided_json: "));

  v1::OutputConstraint not_json;
  not_json.set_json_schema("{\"type\":");
  CHECK_THAT(std::string(compiler.CompileNow(not_json).status().message()), Catch::Contains("not valid JSON"));
  v1::OutputConstraint lookahead;
  lookahead.set_regex("a(?=b)");
  CHECK_FALSE(compiler.CompileNow(lookahead).ok());
  v1::OutputConstraint left_recursive;
  left_recursive.set_grammar("root ::= root \"a\" | \"b\"");
  CHECK_THAT(std::string(compiler.CompileNow(left_recursive).status().message()), Catch::Contains("left-recursive"));
  CHECK_FALSE(compiler.CompileNow(v1::OutputConstraint()).ok());
  // A constraint no text satisfies would leave every draw without a token.
  v1::OutputConstraint empty_class;
  empty_class.set_regex("a[]");
  CHECK_THAT(std::string(compiler.CompileNow(empty_class).status().message()), Catch::Contains("matches no text"));
}

TEST_CASE("constraint compiler: JSON is compact unless the worker allows whitespace", "[unit]") {
  const auto tokenizer = testing::MakeByteTokenizer();
  v1::OutputConstraint schema;
  schema.set_json_schema(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
  ConstraintCompiler compact(*tokenizer, {testing::kImEnd});
  const absl::StatusOr<engine::OutputConstraint> tight = compact.CompileNow(schema);
  REQUIRE(tight.ok());
  CHECK(grammar::GrammarMatcher(tight->grammar, nullptr).AcceptBytes("{\"a\":1}"));
  CHECK_FALSE(grammar::GrammarMatcher(tight->grammar, nullptr).AcceptBytes("{ \"a\":1}"));
  ConstraintCompilerOptions options;
  options.json_max_whitespace = 2;
  ConstraintCompiler spaced(*tokenizer, {testing::kImEnd}, options);
  const absl::StatusOr<engine::OutputConstraint> loose = spaced.CompileNow(schema);
  REQUIRE(loose.ok());
  grammar::GrammarMatcher matcher(loose->grammar, nullptr);
  CHECK(matcher.AcceptBytes("{ \"a\" :\n\t1 }"));
  CHECK(matcher.CanEnd());
  CHECK_FALSE(grammar::GrammarMatcher(loose->grammar, nullptr).AcceptBytes("{   \"a\":1}"));
}

TEST_CASE("constraint compiler: asynchronous compiles answer every caller", "[unit]") {
  const auto tokenizer = testing::MakeByteTokenizer();
  ConstraintCompiler compiler(*tokenizer, {testing::kImEnd});
  constexpr int kCalls = 8;
  std::vector<absl::Notification> done(kCalls);
  std::vector<absl::StatusOr<engine::OutputConstraint>> results(kCalls, absl::UnknownError("not called"));
  for (int i = 0; i < kCalls; ++i) {
    v1::OutputConstraint constraint;
    constraint.set_regex(i % 2 == 0 ? "[0-9]{1,3}" : "(");  // half of them refused
    compiler.Compile(constraint, [&, i](absl::StatusOr<engine::OutputConstraint> result) {
      results[i] = std::move(result);
      done[i].Notify();
    });
  }
  for (int i = 0; i < kCalls; ++i) {
    REQUIRE(done[i].WaitForNotificationWithTimeout(absl::Seconds(30)));
    CHECK(results[i].ok() == (i % 2 == 0));
  }
}

}  // namespace
}  // namespace llmc::worker
