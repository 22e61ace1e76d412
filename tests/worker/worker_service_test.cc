// The Worker gRPC service over the fake engine, in-process on a loopback port, driven by a real client.
#include "worker/service/worker_service.h"

#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "tests/support/byte_tokenizer.h"
#include "tests/support/catch.h"
#include "tests/support/fake_engine.h"
#include "tests/support/grpc_channel.h"
#include "tests/support/wait.h"

namespace llmc::worker {
namespace {

using testing::FakeEngine;
using testing::WaitUntil;

// The server side: fake engine, service, server; and a client stub.
class ServiceFixture {
 public:
  explicit ServiceFixture(testing::FakeEngineOptions options = {})
      : tokenizer_(testing::MakeByteTokenizer()), engine_(options) {
    REQUIRE(engine_.Start().ok());
    service_ = std::make_unique<WorkerService>(engine_, MakeServedModel(engine_, *tokenizer_, ""), "worker-test");
    service_->SetState(v1::WORKER_STATE_READY);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
    stub_ = v1::Worker::NewStub(testing::MakeTestChannel(address_));
  }

  ~ServiceFixture() {
    engine_.Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  FakeEngine engine_;
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<v1::Worker::Stub> stub_;
};

struct StreamResult {
  std::vector<v1::GenerateResponse> responses;
  grpc::Status status;
};

// A 20 s deadline, and the call waits for the channel to connect within it: under TSan beside other tests, a
// connection attempt once timed out before the server's first frame, and a fail-fast call then ends
// UNAVAILABLE before it reaches the service these tests are about.
void PrepareClientContext(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  context.set_wait_for_ready(true);
}

StreamResult RunStream(v1::Worker::Stub& stub, const v1::GenerateRequest& request) {
  grpc::ClientContext context;
  PrepareClientContext(context);
  auto reader = stub.Generate(&context, request);
  StreamResult result;
  v1::GenerateResponse response;
  while (reader->Read(&response)) result.responses.push_back(response);
  result.status = reader->Finish();
  return result;
}

v1::GenerateRequest IdsRequest(const std::string& request_id, int32_t first, int32_t count, uint32_t max_tokens,
                               uint32_t n = 1) {
  v1::GenerateRequest request;
  request.set_request_id(request_id);
  request.set_model("fake-model");
  for (int32_t i = 0; i < count; ++i) request.mutable_prompt_token_ids()->add_ids(first + i);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  request.mutable_sampling()->set_n(n);
  return request;
}

// Each choice's deltas, with the index continuity a receiver checks: index k is the k-th token.
void CheckEcho(const StreamResult& result, int32_t first, uint32_t expected_tokens, uint32_t n,
               v1::FinishReason reason) {
  INFO("stream status " << result.status.error_code() << ": " << result.status.error_message());
  REQUIRE(result.status.ok());
  REQUIRE(!result.responses.empty());
  for (uint32_t choice = 0; choice < n; ++choice) {
    uint32_t next_index = 0;
    v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
    for (const auto& response : result.responses) {
      for (const auto& delta : response.deltas()) {
        if (delta.choice_index() != choice) continue;
        CHECK(finish == v1::FINISH_REASON_UNSPECIFIED);  // nothing after the last delta
        REQUIRE(delta.index() == next_index);
        for (int32_t token : delta.token_ids()) CHECK(token == first + static_cast<int32_t>(next_index++));
        if (delta.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish = delta.finish_reason();
      }
    }
    CHECK(next_index == expected_tokens);
    CHECK(finish == reason);
  }
  const v1::Usage& usage = result.responses.back().usage();
  CHECK(usage.completion_tokens() == expected_tokens * n);
  for (size_t i = 0; i + 1 < result.responses.size(); ++i) CHECK(!result.responses[i].has_usage());
}

TEST_CASE("worker service: concurrent streams arrive complete, in order, with index continuity", "[unit][worker]") {
  ServiceFixture fixture;
  constexpr int kStreams = 12;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      // Odd streams stop after echoing their prompt (STOP); even ones hit max_tokens first (LENGTH).
      const uint32_t max_tokens = i % 2 == 0 ? 10 : 100;
      results[i] = RunStream(*fixture.stub_, IdsRequest("r" + std::to_string(i), i, 20 + i, max_tokens, 1 + i % 3));
    });
  }
  for (auto& client : clients) client.join();
  for (int i = 0; i < kStreams; ++i) {
    INFO("stream " << i);
    const bool length = i % 2 == 0;
    CheckEcho(results[i], i, length ? 10 : 20 + i, 1 + i % 3,
              length ? v1::FINISH_REASON_LENGTH : v1::FINISH_REASON_STOP);
    CHECK(results[i].responses.back().usage().prompt_tokens() == static_cast<uint32_t>(20 + i));
  }
}

TEST_CASE("worker service: a text prompt is tokenized, the prompt ids come back first when asked", "[unit][worker]") {
  ServiceFixture fixture;
  v1::GenerateRequest request;
  request.set_prompt("abc");
  request.set_return_prompt_token_ids(true);
  const StreamResult result = RunStream(*fixture.stub_, request);
  REQUIRE(result.status.ok());
  // Three tokens, echoed one per step; deltas that queue behind a slow write may leave in one message.
  REQUIRE(!result.responses.empty());
  CHECK(std::vector<int32_t>(result.responses[0].prompt_token_ids().begin(),
                             result.responses[0].prompt_token_ids().end()) == std::vector<int32_t>{'a', 'b', 'c'});
  std::string text;
  for (size_t i = 0; i < result.responses.size(); ++i) {
    if (i > 0) CHECK(result.responses[i].prompt_token_ids().empty());
    for (const auto& delta : result.responses[i].deltas()) text += delta.text();
  }
  CHECK(text == "97 98 99 ");
  // Defaults were resolved before the engine saw the request: max_tokens is the rest of the context.
  REQUIRE(fixture.engine_.submitted().size() == 1);
  CHECK(fixture.engine_.submitted()[0].sampling.max_tokens == 4096 - 3);
}

TEST_CASE("worker service: a client cancelling its stream reaches Engine::Abort", "[unit][worker]") {
  testing::FakeEngineOptions options;
  options.step_delay = absl::Milliseconds(20);
  ServiceFixture fixture(options);
  grpc::ClientContext context;
  PrepareClientContext(context);
  auto reader = fixture.stub_->Generate(&context, IdsRequest("cancel-me", 1, 200, 200));
  v1::GenerateResponse response;
  REQUIRE(reader->Read(&response));
  REQUIRE(reader->Read(&response));
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  CHECK(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  REQUIRE(WaitUntil([&] { return !fixture.engine_.aborted_ids().empty(); }, absl::Seconds(5)));
  REQUIRE(fixture.engine_.submitted_ids().size() == 1);
  for (uint64_t id : fixture.engine_.aborted_ids()) CHECK(id == fixture.engine_.submitted_ids()[0]);
  CHECK(WaitUntil([&] { return fixture.engine_.NumUnfinished() == 0 && fixture.service_->live_streams() == 0; },
                  absl::Seconds(5)));
}

TEST_CASE("worker service: a full queue answers RESOURCE_EXHAUSTED at once", "[unit][worker]") {
  testing::FakeEngineOptions options;
  options.max_unfinished = 2;
  ServiceFixture fixture(options);
  fixture.engine_.SetPaused(true);
  std::vector<std::thread> held;
  std::vector<grpc::Status> held_status(2);
  for (int i = 0; i < 2; ++i) {
    held.emplace_back([&, i] { held_status[i] = RunStream(*fixture.stub_, IdsRequest("held", 1, 3, 3)).status; });
  }
  REQUIRE(WaitUntil([&] { return fixture.engine_.NumUnfinished() == 2; }, absl::Seconds(5)));
  const StreamResult refused = RunStream(*fixture.stub_, IdsRequest("refused", 1, 3, 3));
  CHECK(refused.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(refused.status.error_message(), Catch::Contains("queue is full"));
  CHECK(refused.responses.empty());
  fixture.engine_.SetPaused(false);
  for (auto& thread : held) thread.join();
  CHECK(held_status[0].ok());
  CHECK(held_status[1].ok());
}

TEST_CASE("worker service: an engine error after some tokens ends the stream with that code", "[unit][worker]") {
  ServiceFixture fixture;
  fixture.engine_.FailAfter("doomed", 3, absl::InternalError("the model produced NaNs"));
  const StreamResult result = RunStream(*fixture.stub_, IdsRequest("doomed", 1, 10, 10));
  CHECK(result.status.error_code() == grpc::StatusCode::INTERNAL);
  CHECK(result.status.error_message() == "the model produced NaNs");
  // Everything produced before the error still arrives (deltas queued behind a slow reader may be merged).
  std::vector<int32_t> tokens;
  for (const auto& response : result.responses) {
    for (const auto& delta : response.deltas())
      tokens.insert(tokens.end(), delta.token_ids().begin(), delta.token_ids().end());
  }
  CHECK(tokens.size() == 3);
  REQUIRE_FALSE(result.responses.empty());
  CHECK(result.responses.back().deltas(0).index() + result.responses.back().deltas(0).token_ids_size() == 3);

  fixture.engine_.FailAfter("late", 0, absl::DeadlineExceededError("too slow"));
  CHECK(RunStream(*fixture.stub_, IdsRequest("late", 1, 10, 10)).status.error_code() ==
        grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_CASE("worker service: invalid requests, other models and a draining worker are refused", "[unit][worker]") {
  ServiceFixture fixture;
  v1::GenerateRequest bad = IdsRequest("bad", 1, 3, 3);
  bad.mutable_sampling()->set_top_p(2);
  StreamResult result = RunStream(*fixture.stub_, bad);
  CHECK(result.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(result.status.error_message(), Catch::Contains("sampling.top_p"));

  v1::GenerateRequest other = IdsRequest("other", 1, 3, 3);
  other.set_model("llama-70b");
  result = RunStream(*fixture.stub_, other);
  CHECK(result.status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_THAT(result.status.error_message(), Catch::Contains("fake-model"));
  CHECK(fixture.engine_.submitted().empty());

  fixture.service_->SetState(v1::WORKER_STATE_DRAINING);
  result = RunStream(*fixture.stub_, IdsRequest("late", 1, 3, 3));
  CHECK(result.status.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(result.status.error_message(), Catch::Contains("draining"));
  CHECK(fixture.engine_.submitted().empty());
}

TEST_CASE("worker service: a reader that falls behind past the queue cap gets FAILED_PRECONDITION, others go on",
          "[unit][worker]") {
  ServiceFixture fixture;
  fixture.service_->set_max_stream_queued_bytes(2048);
  // A client that takes at most 1 KiB ahead of its reads (no window growth), and then reads nothing.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto slow_stub =
      v1::Worker::NewStub(grpc::CreateCustomChannel(fixture.address_, grpc::InsecureChannelCredentials(), args));
  // 16 choices echoing a 2,000-token prompt: some 500 KB, far more than gRPC's buffers hold for the reader.
  v1::GenerateRequest request = IdsRequest("slow", 1, 0, 2000, 16);
  for (int32_t i = 0; i < 2000; ++i) request.mutable_prompt_token_ids()->add_ids(1 + i % 250);
  grpc::ClientContext context;
  PrepareClientContext(context);
  auto reader = slow_stub->Generate(&context, request);
  REQUIRE(WaitUntil([&] { return !fixture.engine_.aborted_ids().empty(); }, absl::Seconds(15)));
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
  }
  const grpc::Status status = reader->Finish();
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(status.error_message(), Catch::Contains("too slowly"));
  CHECK(WaitUntil([&] { return fixture.service_->stream_queued_bytes() == 0; }, absl::Seconds(5)));
  // The engine serves the next request as before.
  CheckEcho(RunStream(*fixture.stub_, IdsRequest("next", 1, 5, 100)), 1, 5, 1, v1::FINISH_REASON_STOP);
}

TEST_CASE("worker service: streams the engine drops at Stop end UNAVAILABLE", "[unit][worker]") {
  ServiceFixture fixture;
  fixture.engine_.SetPaused(true);
  StreamResult result;
  std::thread client([&] { result = RunStream(*fixture.stub_, IdsRequest("stranded", 1, 3, 3)); });
  REQUIRE(WaitUntil([&] { return fixture.engine_.NumUnfinished() == 1; }, absl::Seconds(5)));
  fixture.engine_.Stop();
  client.join();
  CHECK(result.status.error_code() == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("worker service: Tokenize, Detokenize and GetStatus answer", "[unit][worker]") {
  ServiceFixture fixture;
  {
    grpc::ClientContext context;
    v1::TokenizeRequest request;
    request.set_text("hello");
    request.set_count_only(true);
    v1::TokenizeResponse response;
    REQUIRE(fixture.stub_->Tokenize(&context, request, &response).ok());
    CHECK(response.count() == 5);
    CHECK(response.token_ids().empty());
    CHECK(response.max_context_length() == 4096);
  }
  {
    grpc::ClientContext context;
    v1::TokenizeRequest request;
    request.set_model("nope");
    request.set_text("hello");
    v1::TokenizeResponse response;
    CHECK(fixture.stub_->Tokenize(&context, request, &response).error_code() == grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    v1::DetokenizeRequest request;
    for (char c : std::string("hey")) request.add_token_ids(c);
    v1::DetokenizeResponse response;
    REQUIRE(fixture.stub_->Detokenize(&context, request, &response).ok());
    CHECK(response.text() == "hey");
  }
  {
    grpc::ClientContext context;
    v1::GetStatusResponse response;
    REQUIRE(fixture.stub_->GetStatus(&context, v1::GetStatusRequest(), &response).ok());
    CHECK(response.worker_id() == "worker-test");
    CHECK(response.state() == v1::WORKER_STATE_READY);
    REQUIRE(response.models_size() == 1);
    CHECK(response.models(0).name() == "fake-model");
    CHECK(response.models(0).chat_template() == "chatml");
    CHECK(response.models(0).vocab_size() == 300);
    CHECK(response.load().max_running() == 64);
    CHECK(!response.version().empty());
  }
}

TEST_CASE("worker service: a large Tokenize or Detokenize runs on the bounded executor, not the gRPC thread",
          "[unit][worker]") {
  ServiceFixture fixture;
  // Hold both executor threads and fill its queue: a request that needs it is refused at once.
  BoundedExecutor& executor = fixture.service_->large_requests_for_testing();
  absl::Notification release;
  std::atomic<int> holding{0};
  for (int i = 0; i < 2; ++i) {
    REQUIRE(executor.TrySubmit([&] {
      ++holding;
      release.WaitForNotification();
    }));
  }
  REQUIRE(WaitUntil([&] { return holding.load() == 2; }, absl::Seconds(5)));
  int queued = 0;
  while (executor.TrySubmit([] {})) ++queued;
  REQUIRE(queued > 0);

  v1::TokenizeRequest large;
  large.set_text(std::string(WorkerService::kInlineConversionBytes + 1, 'a'));
  large.set_count_only(true);
  v1::DetokenizeRequest large_ids;
  for (size_t i = 0; i < WorkerService::kInlineConversionBytes; ++i) large_ids.add_token_ids('a');
  {
    grpc::ClientContext context;
    PrepareClientContext(context);
    v1::TokenizeResponse response;
    CHECK(fixture.stub_->Tokenize(&context, large, &response).error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  {
    grpc::ClientContext context;
    PrepareClientContext(context);
    v1::DetokenizeResponse response;
    CHECK(fixture.stub_->Detokenize(&context, large_ids, &response).error_code() ==
          grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  {
    // A small one is answered on the gRPC thread meanwhile.
    grpc::ClientContext context;
    PrepareClientContext(context);
    v1::TokenizeRequest small;
    small.set_text("hello");
    small.set_count_only(true);
    v1::TokenizeResponse response;
    REQUIRE(fixture.stub_->Tokenize(&context, small, &response).ok());
    CHECK(response.count() == 5);
  }
  release.Notify();
  // Once the executor is free, the large ones are answered from it.
  REQUIRE(WaitUntil([&] { return executor.TrySubmit([] {}); }, absl::Seconds(5)));
  {
    grpc::ClientContext context;
    PrepareClientContext(context);
    v1::TokenizeResponse response;
    REQUIRE(fixture.stub_->Tokenize(&context, large, &response).ok());
    CHECK(response.count() == static_cast<uint32_t>(WorkerService::kInlineConversionBytes + 1));
  }
  {
    grpc::ClientContext context;
    PrepareClientContext(context);
    v1::DetokenizeResponse response;
    REQUIRE(fixture.stub_->Detokenize(&context, large_ids, &response).ok());
    CHECK(response.text().size() == WorkerService::kInlineConversionBytes);
  }
}

}  // namespace
}  // namespace llmc::worker
