// Encode throughput of the C++ tokenizer on one thread; prints one JSON line like the JavaScript
// reference benchmark (tests/tokenizer/reference_bench.mjs) so scripts/bench-tokenizer.sh can put the two
// side by side. Not a test: it measures, it does not judge.
//
//   llmc_tokenizer_bench <name> <tokenizer.json> <text-file>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "worker/tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " <name> <tokenizer.json> <text-file>\n";
    return 2;
  }
  auto tokenizer = llmc::tokenizer::Tokenizer::FromFile(argv[2]);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status().message() << "\n";
    return 1;
  }
  std::ifstream in(argv[3], std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  // Lines with their newline, the same units the JavaScript benchmark encodes.
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    lines.emplace_back(text.data() + start, end - start);
    start = end;
  }
  size_t warmed = 0;
  for (size_t i = 0; i < lines.size() && warmed < 200 * 1000; ++i) {
    warmed += lines[i].size();
    (void)(*tokenizer)->Encode(absl::string_view(lines[i].data(), lines[i].size()));
  }
  size_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& line : lines) {
    auto ids = (*tokenizer)->Encode(absl::string_view(line.data(), line.size()));
    if (!ids.ok()) {
      std::cerr << ids.status().message() << "\n";
      return 1;
    }
    tokens += ids->size();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "{\"encoder\":\"llmc-" << argv[1] << "\",\"bytes\":" << text.size() << ",\"tokens\":" << tokens
            << ",\"seconds\":" << seconds << ",\"mb_per_s\":" << text.size() / 1e6 / seconds << "}\n";
  return 0;
}
