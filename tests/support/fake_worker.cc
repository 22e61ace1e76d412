#include "tests/support/fake_worker.h"

#include "absl/strings/str_split.h"
#include "tests/support/grpc_channel.h"

namespace llmc::testing {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(1);

void SetFakeWorkerDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(kRpcTimeout));
}

}  // namespace

v1::RegisterWorkerRequest MakeRegistration(const std::string& worker_id, const std::string& address,
                                           const std::string& models, uint32_t max_running) {
  v1::RegisterWorkerRequest request;
  request.set_worker_id(worker_id);
  request.set_address(address);
  for (absl::string_view name : absl::StrSplit(models, ',', absl::SkipEmpty())) {
    v1::ModelInfo* model = request.add_models();
    model->set_name(std::string(name));
    model->set_max_context_length(4096);
    model->set_chat_template("chatml");
  }
  request.mutable_load()->set_max_running(max_running);
  request.mutable_load()->set_max_waiting(64);
  request.set_state(v1::WORKER_STATE_READY);
  return request;
}

FakeWorker::FakeWorker(const std::string& controller_address, v1::RegisterWorkerRequest registration,
                       absl::Duration heartbeat_interval)
    : stub_(v1::Controller::NewStub(MakeTestChannel(controller_address))),
      registration_(std::move(registration)),
      heartbeat_interval_(heartbeat_interval),
      load_(registration_.load()) {}

FakeWorker::~FakeWorker() { Silence(); }

void FakeWorker::Start() {
  thread_ = std::thread([this] { Run(); });
}

void FakeWorker::Silence() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void FakeWorker::SetLoad(const v1::WorkerLoad& load) {
  absl::MutexLock lock(&mu_);
  load_ = load;
}

void FakeWorker::SetState(v1::WorkerState state) {
  absl::MutexLock lock(&mu_);
  state_ = state;
}

void FakeWorker::Run() {
  do {
    if (!registered_) {
      registered_ = TryRegister();
    } else {
      TryHeartbeat();
      if (!registered_) registered_ = TryRegister();  // told "unknown": register at once
    }
  } while (!stop_.WaitForNotificationWithTimeout(heartbeat_interval_));
}

bool FakeWorker::TryRegister() {
  v1::RegisterWorkerRequest request = registration_;
  {
    absl::MutexLock lock(&mu_);
    *request.mutable_load() = load_;
    request.set_state(state_);
  }
  grpc::ClientContext context;
  SetFakeWorkerDeadline(context);
  v1::RegisterWorkerResponse response;
  if (!stub_->RegisterWorker(&context, request, &response).ok()) return false;
  ++registrations_;
  return true;
}

void FakeWorker::TryHeartbeat() {
  v1::HeartbeatRequest request;
  request.set_worker_id(registration_.worker_id());
  {
    absl::MutexLock lock(&mu_);
    *request.mutable_load() = load_;
    request.set_state(state_);
  }
  grpc::ClientContext context;
  SetFakeWorkerDeadline(context);
  v1::HeartbeatResponse response;
  if (!stub_->Heartbeat(&context, request, &response).ok()) return;  // controller down: try again next tick
  if (response.unknown_worker()) {
    registered_ = false;
  } else {
    ++heartbeats_;
  }
}

}  // namespace llmc::testing
