#include "common/config/config_loader.h"

#include <fstream>
#include <sstream>

#include "common/config/controller_config.h"
#include "common/config/gateway_config.h"
#include "common/config/worker_config.h"
#include "common/message_limits.h"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"

namespace llmc::config {
namespace {

struct CacheSettings {
  uint32_t block_size = 16;
  double fraction = 0.9;

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("block_size", block_size, "tokens per block");
    v("fraction", fraction, "share of memory");
  }
};

// A configuration with every supported field type, nested under the `worker:` section.
struct SampleConfig {
  std::string name = "default";
  int32_t count = 3;
  bool verbose = false;
  absl::Duration interval = absl::Seconds(2);
  std::vector<std::string> tags = {"a"};
  CacheSettings cache;

  template <typename Visitor>
  void VisitFields(Visitor& v) {
    v("name", name, "a name");
    v("count", count, "a count");
    v("verbose", verbose, "a flag");
    v("interval", interval, "a duration");
    v("tags", tags, "a list");
    v("cache", cache, "nested");
  }

  absl::Status Validate() const {
    if (count < 0) return absl::InvalidArgumentError("count must be >= 0");
    return absl::OkStatus();
  }
};

const ProgramInfo kProgram{"llmc-sample", "worker", "sample program"};

std::string WriteFile(const std::string& text) {
  const std::string path = testing::MakeTempDir("llmc-config") + "/config.yaml";
  std::ofstream(path) << text;
  return path;
}

absl::StatusOr<ConfigOutcome> Load(SampleConfig& config, std::vector<std::string> args, std::string* output = nullptr) {
  std::vector<ConfigField> fields = CollectConfigFields(config);
  std::ostringstream out;
  auto outcome = LoadConfigFromArgs(
      kProgram, args, fields, [&] { return config.Validate(); }, out);
  if (output) *output = out.str();
  return outcome;
}

TEST_CASE("config: defaults come from the struct", "[unit][config]") {
  SampleConfig config;
  REQUIRE(Load(config, {}).value() == ConfigOutcome::kRun);
  CHECK(config.name == "default");
  CHECK(config.cache.block_size == 16);
}

TEST_CASE("config: YAML section values, nested keys and lists are applied", "[unit][config]") {
  const std::string path = WriteFile(
      "worker:\n  name: alpha\n  count: 7\n  verbose: true\n  interval: 1500ms\n  tags: [x, y]\n"
      "  cache:\n    block_size: 32\n    fraction: 0.5\ncontroller:\n  anything: ignored by the worker\n");
  SampleConfig config;
  REQUIRE(Load(config, {"--config", path}).value() == ConfigOutcome::kRun);
  CHECK(config.name == "alpha");
  CHECK(config.count == 7);
  CHECK(config.verbose);
  CHECK(config.interval == absl::Milliseconds(1500));
  CHECK(config.tags == std::vector<std::string>{"x", "y"});
  CHECK(config.cache.block_size == 32);
  CHECK(config.cache.fraction == 0.5);
}

TEST_CASE("config: flags override the file, in every spelling", "[unit][config]") {
  const std::string path = WriteFile("worker:\n  name: from-file\n  count: 7\n");
  SampleConfig config;
  REQUIRE(Load(config, {"--config=" + path, "--name=from-flag", "--count", "9", "--verbose", "--tags=p, q",
                        "--cache.block_size=64"})
              .value() == ConfigOutcome::kRun);
  CHECK(config.name == "from-flag");
  CHECK(config.count == 9);
  CHECK(config.verbose);
  CHECK(config.tags == std::vector<std::string>{"p", "q"});
  CHECK(config.cache.block_size == 64);
}

TEST_CASE("config: an unknown YAML key is named, with a suggestion", "[unit][config]") {
  const std::string path = WriteFile("worker:\n  cache:\n    blok_size: 8\n");
  SampleConfig config;
  auto outcome = Load(config, {"--config", path});
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(outcome.status().message());
  CHECK_THAT(message, Catch::Contains(path));
  CHECK_THAT(message, Catch::Contains("worker.cache.blok_size: unknown key"));
  CHECK_THAT(message, Catch::Contains("did you mean cache.block_size"));
}

TEST_CASE("config: a wrongly typed value names its key and the expected type", "[unit][config]") {
  SampleConfig config;
  auto outcome = Load(config, {"--config", WriteFile("worker:\n  interval: soon\n")});
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()), Catch::Contains("worker.interval: expected a duration"));

  outcome = Load(config, {"--count=many"});
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()), Catch::Contains("--count: expected an integer"));

  outcome = Load(config, {"--config", WriteFile("worker:\n  name: [1, 2]\n")});
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()), Catch::Contains("worker.name: expected a string value"));
}

TEST_CASE("config: unknown sections, unknown flags and broken files are refused", "[unit][config]") {
  SampleConfig config;
  auto outcome = Load(config, {"--config", WriteFile("wroker:\n  name: x\n")});
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()),
             Catch::Contains("wroker: unknown section (did you mean worker?)"));

  outcome = Load(config, {"--nmae=x"});
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()), Catch::Contains("unknown flag --nmae (did you mean --name?)"));

  outcome = Load(config, {"--config", WriteFile("worker: [unclosed\n")});
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()), Catch::Contains("YAML syntax error"));

  outcome = Load(config, {"--config", "/nonexistent/llmc.yaml"});
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.status().code() == absl::StatusCode::kNotFound);

  outcome = Load(config, {"positional"});
  REQUIRE_FALSE(outcome.ok());
}

TEST_CASE("config: validation runs after flags and its error is reported", "[unit][config]") {
  SampleConfig config;
  auto outcome = Load(config, {"--count=-1"});
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()), Catch::Contains("invalid configuration: count must be >= 0"));
}

TEST_CASE("config: --print-config output loads back to the same configuration", "[unit][config]") {
  SampleConfig config;
  std::string printed;
  REQUIRE(
      Load(config, {"--name=round trip: yes", "--interval=90s", "--tags=a,b", "--print-config"}, &printed).value() ==
      ConfigOutcome::kExit);
  SampleConfig reloaded;
  std::string printed_again;
  REQUIRE(Load(reloaded, {"--config", WriteFile(printed), "--print-config"}, &printed_again).value() ==
          ConfigOutcome::kExit);
  CHECK(reloaded.name == "round trip: yes");
  CHECK(reloaded.interval == absl::Seconds(90));
  CHECK(reloaded.tags == std::vector<std::string>{"a", "b"});
  CHECK(printed_again == printed);
}

TEST_CASE("config: --help lists every key with its default", "[unit][config]") {
  SampleConfig config;
  std::string help;
  REQUIRE(Load(config, {"--help"}, &help).value() == ConfigOutcome::kExit);
  for (const char* expected : {"--name=<string>", "--count=<int>", "--verbose=<bool>", "--interval=<duration>",
                               "--tags=<list>", "--cache.block_size=<uint>", "(default: 2s)"}) {
    CHECK_THAT(help, Catch::Contains(expected));
  }
}

TEST_CASE("config: the real process configurations validate their defaults and reject bad values", "[unit][config]") {
  CHECK(ControllerConfig{}.Validate().ok());
  CHECK(WorkerConfig{}.Validate().ok());
  CHECK(GatewayConfig{}.Validate().ok());

  ControllerConfig controller;
  controller.heartbeat_interval = absl::ZeroDuration();
  CHECK_THAT(std::string(controller.Validate().message()), Catch::Contains("heartbeat_interval"));
  controller = ControllerConfig{};
  controller.listen_address = "nonsense";
  CHECK_THAT(std::string(controller.Validate().message()), Catch::Contains("listen_address"));
  controller = ControllerConfig{};
  controller.expiry_missed_heartbeats = 0;
  CHECK_THAT(std::string(controller.Validate().message()), Catch::Contains("expiry_missed_heartbeats"));

  WorkerConfig worker;
  worker.controller_address = "127.0.0.1:0";
  CHECK_THAT(std::string(worker.Validate().message()), Catch::Contains("controller_address"));
  WorkerConfig quantized;
  for (const char* method : {"none", "int8", "w8a16", "w8a8", "int4"}) {
    quantized.quantization = method;
    CHECK(quantized.Validate().ok());
  }
  quantized.quantization = "int2";
  CHECK_THAT(std::string(quantized.Validate().message()), Catch::Contains("quantization"));
  quantized.quantization = "int4";
  quantized.quantization_group_size = 256;  // int4 groups: 32, 64 or 128
  CHECK_THAT(std::string(quantized.Validate().message()), Catch::Contains("int4 quantization_group_size"));
  quantized.quantization = "w8a8";
  quantized.quantization_group_size = 128;
  CHECK(quantized.Validate().ok());
  quantized.quantization = "none";
  CHECK_THAT(std::string(quantized.Validate().message()),
             Catch::Contains("applies only with quantization int8, w8a16, w8a8, int4, w4a16 or w4a8"));
  // The typed-output parsers: auto (the package's), or a format the worker knows.
  WorkerConfig parsers;
  CHECK(parsers.tool_call_parser == "auto");
  CHECK(parsers.reasoning_parser == "auto");
  for (const char* name :
       {"auto", "none", "hermes", "qwen3_coder", "llama3_json", "pythonic", "mistral", "deepseek_v3", "deepseek_v31"}) {
    parsers.tool_call_parser = name;
    CHECK(parsers.Validate().ok());
  }
  parsers.tool_call_parser = "qwen3_xml";
  CHECK_THAT(
      std::string(parsers.Validate().message()),
      Catch::Contains("tool_call_parser must be one of auto, none, hermes") && Catch::Contains("got 'qwen3_xml'"));
  parsers = WorkerConfig{};
  for (const char* name : {"auto", "none", "think"}) {
    parsers.reasoning_parser = name;
    CHECK(parsers.Validate().ok());
  }
  parsers.reasoning_parser = "deepseek_r1";
  CHECK_THAT(std::string(parsers.Validate().message()),
             Catch::Contains("reasoning_parser must be one of auto, none, think; got 'deepseek_r1'"));
  GatewayConfig gateway;
  gateway.log_level = "loud";
  CHECK_THAT(std::string(gateway.Validate().message()), Catch::Contains("log_level"));
  // A body the gateway accepts must fit the cluster's gRPC messages (common/message_limits.h).
  GatewayConfig big_bodies;
  big_bodies.max_body_bytes = kMaxRequestBodyBytes;
  CHECK(big_bodies.Validate().ok());
  big_bodies.max_body_bytes = kMaxRequestBodyBytes + 1;
  CHECK_THAT(std::string(big_bodies.Validate().message()), Catch::Contains("max_body_bytes must be in [1024, "));
  CHECK(kMaxRequestBodyBytes * 2 <= static_cast<uint64_t>(kMaxGrpcMessageBytes));
}

TEST_CASE("config: the worker's typed-output parsers come from YAML and flags", "[unit][config]") {
  const std::string path = WriteFile(
      "worker:\n  model_path: /models/m\n  tool_call_parser: hermes\n"
      "  reasoning_parser: none\n");
  WorkerConfig config;
  std::vector<ConfigField> fields = CollectConfigFields(config);
  std::ostringstream out;
  const ProgramInfo program{"llmc-worker", "worker", "worker"};
  auto outcome = LoadConfigFromArgs(
      program, {"--config", path}, fields, [&] { return config.Validate(); }, out);
  REQUIRE(outcome.ok());
  CHECK(config.tool_call_parser == "hermes");
  CHECK(config.reasoning_parser == "none");

  config = WorkerConfig{};
  fields = CollectConfigFields(config);
  outcome = LoadConfigFromArgs(
      program, {"--config", path, "--tool_call_parser=deepseek_v31", "--reasoning_parser", "think"}, fields,
      [&] { return config.Validate(); }, out);
  REQUIRE(outcome.ok());
  CHECK(config.tool_call_parser == "deepseek_v31");
  CHECK(config.reasoning_parser == "think");

  config = WorkerConfig{};
  fields = CollectConfigFields(config);
  outcome = LoadConfigFromArgs(
      program, {"--tool_call_parser=glm45"}, fields, [&] { return config.Validate(); }, out);
  REQUIRE_FALSE(outcome.ok());
  CHECK_THAT(std::string(outcome.status().message()), Catch::Contains("tool_call_parser must be one of"));
}

TEST_CASE("config: expiry is heartbeat interval times missed heartbeats", "[unit][config]") {
  ControllerConfig config;
  CHECK(config.expiry_after() == absl::Seconds(6));
  config.heartbeat_interval = absl::Milliseconds(250);
  config.expiry_missed_heartbeats = 4;
  CHECK(config.expiry_after() == absl::Seconds(1));
}

}  // namespace
}  // namespace llmc::config
