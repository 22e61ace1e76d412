// One table of request limits (common/request_limits.h): the gateway's OpenAI parser and the worker's
// request conversion accept and refuse the same values, at each bound and just past it.
#include "common/request_limits.h"

#include <cmath>
#include <string>
#include <vector>

#include "gateway/openai/openai_request.h"
#include "nlohmann/json.hpp"
#include "tests/support/byte_tokenizer.h"
#include "worker/service/request_conversion.h"
// After the torch headers: glog's CHECK would replace Catch's.
#include "tests/support/catch.h"

namespace llmc {
namespace {

using nlohmann::json;

class LimitsFixture {
 protected:
  LimitsFixture() : tokenizer_(testing::MakeByteTokenizer()) {
    model_.info.set_name("fake-model");
    model_.info.set_max_context_length(64);
    model_.info.set_vocab_size(300);
    model_.tokenizer = tokenizer_.get();
  }

  // The gateway's verdict on a completion request with `field` = `value`.
  bool GatewayAccepts(const std::string& field, const json& value) const {
    json body = {{"model", "fake-model"}, {"prompt", "hi"}, {"max_tokens", 4}};
    body[field] = value;
    return gateway::ParseCompletionRequest(body.dump()).ok();
  }

  // The worker's verdict on the same request sent over gRPC, built without the gateway's checks.
  bool WorkerAccepts(const std::function<void(v1::SamplingParams&)>& set) const {
    v1::GenerateRequest request;
    request.set_model("fake-model");
    request.set_prompt("hi");
    request.mutable_sampling()->set_max_tokens(4);
    set(*request.mutable_sampling());
    return worker::ToGenerationRequest(request, model_).ok();
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  worker::ServedModel model_;
};

struct FloatCase {
  limits::FloatLimit limit;
  void (v1::SamplingParams::*set)(float);
};

TEST_CASE_METHOD(LimitsFixture, "request limits: gateway and worker agree on every float parameter's bounds",
                 "[unit][limits]") {
  const std::vector<FloatCase> cases = {
      {limits::kTemperature, &v1::SamplingParams::set_temperature},
      {limits::kTopP, &v1::SamplingParams::set_top_p},
      {limits::kMinP, &v1::SamplingParams::set_min_p},
      {limits::kPresencePenalty, &v1::SamplingParams::set_presence_penalty},
      {limits::kFrequencyPenalty, &v1::SamplingParams::set_frequency_penalty},
      {limits::kRepetitionPenalty, &v1::SamplingParams::set_repetition_penalty},
  };
  for (const FloatCase& c : cases) {
    const std::string name(c.limit.name);
    std::vector<double> inside = {c.limit.max >= FLT_MAX ? 100.0 : c.limit.max};
    std::vector<double> outside = {c.limit.min - 0.5};
    if (c.limit.min_exclusive) {
      outside.push_back(c.limit.min);
      inside.push_back(c.limit.min + 0.01);
    } else {
      inside.push_back(c.limit.min);
    }
    if (c.limit.max < FLT_MAX) outside.push_back(c.limit.max + 0.5);
    for (const double value : inside) {
      INFO(name << " = " << value << " is " << c.limit.Describe());
      CHECK(GatewayAccepts(name, value));
      CHECK(WorkerAccepts([&](v1::SamplingParams& p) { (p.*c.set)(static_cast<float>(value)); }));
    }
    for (const double value : outside) {
      INFO(name << " = " << value << " is not " << c.limit.Describe());
      CHECK(!GatewayAccepts(name, value));
      CHECK(!WorkerAccepts([&](v1::SamplingParams& p) { (p.*c.set)(static_cast<float>(value)); }));
    }
    INFO(name << " = NaN");
    CHECK(!WorkerAccepts([&](v1::SamplingParams& p) { (p.*c.set)(std::nanf("")); }));
  }
}

TEST_CASE_METHOD(LimitsFixture, "request limits: gateway and worker agree on n, top_k, stop and top_logprobs",
                 "[unit][limits]") {
  CHECK(GatewayAccepts("n", limits::kMaxChoices));
  CHECK(WorkerAccepts([](v1::SamplingParams& p) { p.set_n(limits::kMaxChoices); }));
  CHECK(!GatewayAccepts("n", limits::kMaxChoices + 1));
  CHECK(!WorkerAccepts([](v1::SamplingParams& p) { p.set_n(limits::kMaxChoices + 1); }));

  CHECK(GatewayAccepts("top_k", limits::kMinTopK));
  CHECK(WorkerAccepts([](v1::SamplingParams& p) { p.set_top_k(limits::kMinTopK); }));
  CHECK(!GatewayAccepts("top_k", limits::kMinTopK - 1));
  CHECK(!WorkerAccepts([](v1::SamplingParams& p) { p.set_top_k(limits::kMinTopK - 1); }));

  const auto stops = [](int64_t count) {
    json list = json::array();
    for (int64_t i = 0; i < count; ++i) list.push_back("s" + std::to_string(i));
    return list;
  };
  const auto set_stops = [](int64_t count) {
    return [count](v1::SamplingParams& p) {
      for (int64_t i = 0; i < count; ++i) p.add_stop("s" + std::to_string(i));
    };
  };
  CHECK(GatewayAccepts("stop", stops(limits::kMaxStopStrings)));
  CHECK(WorkerAccepts(set_stops(limits::kMaxStopStrings)));
  CHECK(!GatewayAccepts("stop", stops(limits::kMaxStopStrings + 1)));
  CHECK(!WorkerAccepts(set_stops(limits::kMaxStopStrings + 1)));

  // Each stop string's bytes, a lone string as well as a list's entries; and the stop token ids.
  const std::string longest(limits::kMaxStopStringBytes, 'x');
  const std::string too_long = longest + "x";
  CHECK(GatewayAccepts("stop", longest));
  CHECK(GatewayAccepts("stop", json::array({"a", longest})));
  CHECK(WorkerAccepts([&](v1::SamplingParams& p) { p.add_stop(longest); }));
  CHECK(!GatewayAccepts("stop", too_long));
  CHECK(!GatewayAccepts("stop", json::array({"a", too_long})));
  CHECK(!WorkerAccepts([&](v1::SamplingParams& p) { p.add_stop(too_long); }));
  const auto ids = [](int64_t count) { return json(std::vector<int32_t>(static_cast<size_t>(count), 7)); };
  const auto set_ids = [](int64_t count) {
    return [count](v1::SamplingParams& p) {
      for (int64_t i = 0; i < count; ++i) p.add_stop_token_ids(7);
    };
  };
  CHECK(GatewayAccepts("stop_token_ids", ids(limits::kMaxStopTokenIds)));
  CHECK(WorkerAccepts(set_ids(limits::kMaxStopTokenIds)));
  CHECK(!GatewayAccepts("stop_token_ids", ids(limits::kMaxStopTokenIds + 1)));
  CHECK(!WorkerAccepts(set_ids(limits::kMaxStopTokenIds + 1)));
  // The refusals name the parameter.
  json body = {{"model", "fake-model"}, {"prompt", "hi"}, {"stop", too_long}};
  CHECK_THAT(std::string(gateway::ParseCompletionRequest(body.dump()).status().message()),
             Catch::Contains("'stop'") && Catch::Contains("512 bytes"));
  body = {{"model", "fake-model"}, {"prompt", "hi"}, {"stop_token_ids", ids(limits::kMaxStopTokenIds + 1)}};
  CHECK_THAT(std::string(gateway::ParseCompletionRequest(body.dump()).status().message()),
             Catch::Contains("'stop_token_ids'"));
  v1::GenerateRequest request;
  request.set_model("fake-model");
  request.set_prompt("hi");
  request.mutable_sampling()->add_stop("ok");
  request.mutable_sampling()->add_stop(too_long);
  CHECK_THAT(std::string(worker::ToGenerationRequest(request, model_).status().message()),
             Catch::Contains("sampling.stop[1]"));
  request.mutable_sampling()->clear_stop();
  set_ids(limits::kMaxStopTokenIds + 1)(*request.mutable_sampling());
  CHECK_THAT(std::string(worker::ToGenerationRequest(request, model_).status().message()),
             Catch::Contains("sampling.stop_token_ids"));

  CHECK(WorkerAccepts([](v1::SamplingParams& p) {
    p.set_logprobs(true);
    p.set_top_logprobs(limits::kMaxTopLogprobs);
  }));
  CHECK(!WorkerAccepts([](v1::SamplingParams& p) {
    p.set_logprobs(true);
    p.set_top_logprobs(limits::kMaxTopLogprobs + 1);
  }));
}

TEST_CASE_METHOD(LimitsFixture, "request limits: OpenAI's documented ranges hold on both sides", "[unit][limits]") {
  CHECK(GatewayAccepts("temperature", 2.0));
  CHECK_FALSE(GatewayAccepts("temperature", 2.5));
  CHECK_FALSE(WorkerAccepts([](v1::SamplingParams& p) { p.set_temperature(2.5f); }));
  CHECK_FALSE(GatewayAccepts("top_p", 0.0));
  CHECK_FALSE(WorkerAccepts([](v1::SamplingParams& p) { p.set_top_p(0.0f); }));
  CHECK(GatewayAccepts("presence_penalty", -2.0));
  CHECK_FALSE(WorkerAccepts([](v1::SamplingParams& p) { p.set_frequency_penalty(2.5f); }));
  CHECK(GatewayAccepts("n", 16));
  CHECK_FALSE(WorkerAccepts([](v1::SamplingParams& p) { p.set_n(17); }));
}

}  // namespace
}  // namespace llmc
