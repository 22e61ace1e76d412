// What the gateway adds: time to first token and inter-token latency of the same greedy completions sent
// straight to a worker over gRPC and through the gateway over HTTP/SSE, interleaved one request at a time so
// both paths see the same worker state. Prints percentiles and the differences; judges nothing.
//
//   llmc_gateway_bench <gateway-port> <worker-host:port> <model> [requests] [max_tokens]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "llmc/v1/worker.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/support/http_client.h"

namespace {

struct Timings {
  std::vector<double> ttft_ms, itl_ms;
};

std::string Prompt(int request) { return absl::StrCat("Request ", request, ": tell me about the sea and the sky."); }

bool RunDirect(llmc::v1::Worker::Stub& stub, const std::string& model, int request, int max_tokens, Timings& out) {
  llmc::v1::GenerateRequest generate;
  generate.set_model(model);
  generate.set_prompt(Prompt(request));
  generate.mutable_sampling()->set_temperature(0);
  generate.mutable_sampling()->set_max_tokens(max_tokens);
  generate.mutable_sampling()->set_ignore_eos(true);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  const absl::Time start = absl::Now();
  auto reader = stub.Generate(&context, generate);
  llmc::v1::GenerateResponse response;
  absl::Time last = absl::InfinitePast();
  while (reader->Read(&response)) {
    if (response.deltas_size() == 0) continue;
    const absl::Time now = absl::Now();
    (last == absl::InfinitePast() ? out.ttft_ms : out.itl_ms)
        .push_back(absl::ToDoubleMilliseconds(now - (last == absl::InfinitePast() ? start : last)));
    last = now;
  }
  return reader->Finish().ok();
}

bool RunGateway(int port, const std::string& model, int request, int max_tokens, Timings& out) {
  const nlohmann::json body = {{"model", model},   {"prompt", Prompt(request)}, {"max_tokens", max_tokens},
                               {"temperature", 0}, {"ignore_eos", true},        {"stream", true}};
  const absl::Time start = absl::Now();
  llmc::testing::SseClient client(port, "/v1/completions", body.dump());
  if (client.status() != 200) return false;
  absl::Time last = absl::InfinitePast();
  while (auto event = client.NextEvent(absl::Seconds(120))) {
    if (*event == "[DONE]") break;
    const nlohmann::json chunk = nlohmann::json::parse(*event, nullptr, false);
    if (!chunk.is_object() || chunk["choices"].empty()) continue;  // the usage chunk
    const absl::Time now = absl::Now();
    (last == absl::InfinitePast() ? out.ttft_ms : out.itl_ms)
        .push_back(absl::ToDoubleMilliseconds(now - (last == absl::InfinitePast() ? start : last)));
    last = now;
  }
  return !client.failed();
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <gateway-port> <worker-host:port> <model> [requests] [max_tokens]\n", argv[0]);
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const std::string model = argv[3];
  const int requests = argc > 4 ? std::atoi(argv[4]) : 40;
  const int max_tokens = argc > 5 ? std::atoi(argv[5]) : 32;
  auto stub = llmc::v1::Worker::NewStub(grpc::CreateChannel(argv[2], grpc::InsecureChannelCredentials()));
  Timings direct, gateway;
  for (int request = 0; request < requests + 2; ++request) {
    Timings warm_direct, warm_gateway;
    const bool warm = request < 2;  // the first requests warm connections and caches up
    if (!RunDirect(*stub, model, request, max_tokens, warm ? warm_direct : direct) ||
        !RunGateway(port, model, request, max_tokens, warm ? warm_gateway : gateway)) {
      std::fprintf(stderr, "request %d failed\n", request);
      return 1;
    }
  }
  std::printf("%d requests each way, %d tokens each, one at a time (interleaved)\n", requests, max_tokens);
  std::printf("%-26s %10s %10s %10s\n", "", "direct", "gateway", "added");
  for (const auto& [label, p] : {std::pair{"TTFT p50 (ms)", 0.5}, std::pair{"TTFT p90 (ms)", 0.9}}) {
    const double a = Percentile(direct.ttft_ms, p), b = Percentile(gateway.ttft_ms, p);
    std::printf("%-26s %10.3f %10.3f %10.3f\n", label, a, b, b - a);
  }
  for (const auto& [label, p] : {std::pair{"inter-token p50 (ms)", 0.5}, std::pair{"inter-token p90 (ms)", 0.9}}) {
    const double a = Percentile(direct.itl_ms, p), b = Percentile(gateway.itl_ms, p);
    std::printf("%-26s %10.3f %10.3f %10.3f\n", label, a, b, b - a);
  }
  return 0;
}
