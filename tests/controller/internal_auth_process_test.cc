// Integration tests: internal gRPC authentication of the real llmc-controller and llmc-worker binaries. The
// process helpers give every process kTestClusterSecret; here calls come without it, with a wrong one, or
// from another host.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "tests/support/catch.h"
#include "tests/support/cluster_secret.h"
#include "tests/support/controller_process.h"
#include "tests/support/fake_worker.h"
#include "tests/support/grpc_channel.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

// "/llmc.v1.Controller/RegisterWorker", ... for every method the service's descriptor declares, so a method
// added later is covered without touching this test.
std::vector<std::string> MethodPaths(const std::string& service_name) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_name);
  REQUIRE(service != nullptr);
  std::vector<std::string> paths;
  for (int i = 0; i < service->method_count(); ++i) {
    paths.push_back(absl::StrCat("/", service->full_name(), "/", service->method(i)->name()));
  }
  return paths;
}

// Calls `path` with one empty (default) request message through a generic stub, whatever the method's
// shape, and returns the call's status.
grpc::Status CallWithEmptyRequest(const std::shared_ptr<grpc::Channel>& channel, const std::string& path) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&context, path, &queue);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  REQUIRE(queue.Next(&tag, &ok));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  REQUIRE(queue.Next(&tag, &ok));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(3));
  REQUIRE(queue.Next(&tag, &ok));
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

void CheckEveryMethodRefused(const std::string& address, const std::string& service_name) {
  const std::vector<std::string> paths = MethodPaths(service_name);
  CHECK(paths.size() >= 5);
  for (const std::string& secret : {std::string(), std::string(kWrongSecret)}) {
    const std::shared_ptr<grpc::Channel> channel = MakeTestChannel(address, secret);
    for (const std::string& path : paths) {
      INFO(path << (secret.empty() ? " without a secret" : " with a wrong secret"));
      const grpc::Status status = CallWithEmptyRequest(channel, path);
      CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    }
  }
}

grpc::Status Register(const std::shared_ptr<grpc::Channel>& channel, const v1::RegisterWorkerRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::RegisterWorkerResponse response;
  return v1::Controller::NewStub(channel)->RegisterWorker(&context, request, &response);
}

TEST_CASE("internal auth: every Controller and Worker method refuses calls without the cluster secret",
          "[integration][controller][auth]") {
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {"--heartbeat_interval=200ms"});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(), SmallWorkerArgs(controller.address(), "worker-a"));
  REQUIRE(WaitUntil([&] { return Listed(controller, "worker-a"); }, absl::Seconds(20)));

  CheckEveryMethodRefused(controller.address(), "llmc.v1.Controller");
  CheckEveryMethodRefused(worker.address(), "llmc.v1.Worker");

  // Nothing of that reached the registry: the real worker is still there, alone, and still heartbeating.
  const std::vector<v1::WorkerInfo> workers = controller.ListWorkers();
  REQUIRE(workers.size() == 1);
  CHECK(workers[0].worker_id() == "worker-a");
  const uint64_t heartbeats = workers[0].heartbeats();
  CHECK(WaitUntil(
      [&] { return !controller.ListWorkers().empty() && controller.ListWorkers()[0].heartbeats() > heartbeats; },
      absl::Seconds(10)));
  // Health probes stay open (Kubernetes' gRPC probes carry no secret).
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse health;
  const grpc::Status probe = grpc::health::v1::Health::NewStub(MakeTestChannel(controller.address(), ""))
                                 ->Check(&context, grpc::health::v1::HealthCheckRequest(), &health);
  CHECK(probe.ok());
  CHECK(health.status() == HealthCheckResponse::SERVING);
}

TEST_CASE("internal auth: a rogue registration without the secret is refused, and a live id stays with its host",
          "[integration][controller][auth]") {
  const int port = PickFreePort();
  // Listening on [::] (with the secret) takes calls over 127.0.0.1 and over ::1: two hosts for one controller.
  ControllerProcess controller(LLMC_CONTROLLER_BINARY,
                               {"--heartbeat_interval=200ms", absl::StrCat("--listen_address=[::]:", port)}, port);
  FakeWorker worker(controller.address(), MakeRegistration("worker-a", "127.0.0.1:31001", "qwen"),
                    absl::Milliseconds(200));
  worker.Start();
  REQUIRE(WaitUntil([&] { return Listed(controller, "worker-a"); }, absl::Seconds(10)));

  for (const std::string& secret : {std::string(), std::string(kWrongSecret)}) {
    const grpc::Status rogue =
        Register(MakeTestChannel(controller.address(), secret), MakeRegistration("rogue", "127.0.0.1:31666", "qwen"));
    CHECK(rogue.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  CHECK_FALSE(Listed(controller, "rogue"));

  // With the secret but from another host (::1), the live id cannot be taken over nor removed.
  const std::shared_ptr<grpc::Channel> other_host = MakeTestChannel(absl::StrCat("[::1]:", port));
  const grpc::Status takeover = Register(other_host, MakeRegistration("worker-a", "127.0.0.1:31666", "qwen"));
  if (takeover.error_code() == grpc::StatusCode::UNAVAILABLE) {
    WARN("no IPv6 loopback here: the takeover from another host is left out");
    return;
  }
  CHECK(takeover.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::DeregisterWorkerRequest deregister;
  deregister.set_worker_id("worker-a");
  v1::DeregisterWorkerResponse response;
  CHECK(v1::Controller::NewStub(other_host)->DeregisterWorker(&context, deregister, &response).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  const std::vector<v1::WorkerInfo> workers = controller.ListWorkers();
  REQUIRE(workers.size() == 1);
  CHECK(workers[0].address() == "127.0.0.1:31001");
}

TEST_CASE("internal auth: beyond loopback without a secret, the controller and worker start only when told to",
          "[integration][controller][auth]") {
  const CommandResult controller =
      RunCommand(LLMC_CONTROLLER_BINARY, {"--listen_address=0.0.0.0:0", "--metrics_address="});
  CHECK(controller.exit_code == 1);
  CHECK_THAT(controller.output, Catch::Contains("allow_unauthenticated_internal"));

  const CommandResult worker =
      RunCommand(LLMC_WORKER_BINARY, {"--model_path=" + SmallModelPackage(), "--listen_address=0.0.0.0:0",
                                      "--metrics_address=", "--controller_address="});
  CHECK(worker.exit_code == 1);
  CHECK_THAT(worker.output, Catch::Contains("allow_unauthenticated_internal"));

  const CommandResult short_secret = RunCommand(
      LLMC_CONTROLLER_BINARY, {"--listen_address=127.0.0.1:0", "--metrics_address=", "--cluster_secret=short"});
  CHECK(short_secret.exit_code == 1);
  CHECK_THAT(short_secret.output, Catch::Contains("16 to 1024"));

  const std::string dir = MakeTempDir("llmc-open-controller");
  const int port = PickFreePort();
  ChildProcess allowed(
      LLMC_CONTROLLER_BINARY,
      {absl::StrCat("--listen_address=0.0.0.0:", port), "--metrics_address=", "--allow_unauthenticated_internal"},
      dir + "/controller.log");
  REQUIRE(WaitUntil([&] { return !allowed.running() || LoopbackPortAccepts(port); }, absl::Seconds(20)));
  CHECK(allowed.running());
  // Open as configured: a call without any secret is served.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListWorkersResponse listed;
  CHECK(v1::Controller::NewStub(MakeTestChannel(absl::StrCat("127.0.0.1:", port), ""))
            ->ListWorkers(&context, v1::ListWorkersRequest(), &listed)
            .ok());
}

}  // namespace
}  // namespace llmc::testing
