#include "worker/service/controller_link.h"

#include <algorithm>
#include <optional>

#include "common/internal_auth/internal_channel.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "grpcpp/support/channel_arguments.h"
#include "worker/service/served_model.h"

namespace llmc::worker {
namespace {

constexpr absl::Duration kFirstRetry = absl::Milliseconds(100);

// gRPC's default reconnect backoff grows to two minutes, which would hide a restarted controller for that
// long; keep it near the heartbeat interval instead.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, absl::Duration heartbeat_interval,
                                           const internal_auth::ClusterCredentials& credentials) {
  grpc::ChannelArguments args;
  const auto max_backoff = std::clamp(heartbeat_interval, absl::Milliseconds(250), absl::Seconds(5));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(absl::ToInt64Milliseconds(max_backoff)));
  return internal_auth::CreateInternalChannel(address, credentials, std::move(args));
}

}  // namespace

ControllerLink::ControllerLink(ControllerLinkOptions options, v1::ModelInfo model, std::function<v1::WorkerLoad()> load)
    : options_(std::move(options)),
      model_(std::move(model)),
      load_(std::move(load)),
      stub_(v1::Controller::NewStub(
          MakeChannel(options_.controller_address, options_.heartbeat_interval, options_.credentials))),
      interval_(options_.heartbeat_interval) {}

ControllerLink::~ControllerLink() { Stop(/*deregister=*/false); }

void ControllerLink::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ControllerLink::SetState(v1::WorkerState state) {
  absl::MutexLock lock(&mu_);
  if (state_ == state || state_ == v1::WORKER_STATE_DRAINING) return;  // draining is the last state
  state_ = state;
  wake_ = true;
}

void ControllerLink::Stop(bool deregister) {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (deregister && ever_registered_) Deregister();
}

void ControllerLink::Run() {
  ScopedLogContext log_context("worker_id", options_.worker_id);
  absl::Duration retry = kFirstRetry;
  while (true) {
    v1::WorkerState state;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      state = state_;
    }
    std::optional<absl::Duration> backoff;
    if (registered_) {
      absl::StatusOr<bool> unknown = Heartbeat(state);
      if (!unknown.ok()) {
        NoteFailure(unknown.status());
      } else if (*unknown) {
        registered_ = false;
        if (state != v1::WORKER_STATE_DRAINING) {
          LLMC_LOG(Info) << "the controller does not know this worker (restarted or expired it): registering again";
          continue;
        }
      }
    } else if (state != v1::WORKER_STATE_DRAINING) {
      if (absl::Status status = Register(state); status.ok()) {
        retry = kFirstRetry;
      } else {
        NoteFailure(status);
        backoff = retry;
      }
    }
    absl::MutexLock lock(&mu_);
    // The interval may just have come from the controller.
    if (backoff.has_value()) retry = std::min(retry * 2, interval_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), backoff.value_or(interval_));
    wake_ = false;
  }
}

void ControllerLink::SetDeadline(grpc::ClientContext& context) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
}

absl::Status ControllerLink::Register(v1::WorkerState state) {
  v1::RegisterWorkerRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_address(options_.advertised_address);
  *request.add_models() = model_;
  *request.mutable_load() = load_();
  request.set_state(state);
  request.set_version(WorkerVersion());
  grpc::ClientContext context;
  SetDeadline(context);
  v1::RegisterWorkerResponse response;
  if (absl::Status status = FromGrpcStatus(stub_->RegisterWorker(&context, request, &response)); !status.ok()) {
    return status;
  }
  absl::Duration interval = options_.heartbeat_interval;
  if (response.heartbeat_interval_ms() > 0) interval = absl::Milliseconds(response.heartbeat_interval_ms());
  {
    absl::MutexLock lock(&mu_);
    interval_ = interval;
  }
  registered_ = true;
  ever_registered_ = true;
  ++registrations_;
  last_error_.clear();
  LLMC_LOG(Info)
          .With("controller", options_.controller_address)
          .With("address", options_.advertised_address)
          .With("heartbeat_interval", absl::FormatDuration(interval))
      << "registered with the controller";
  return absl::OkStatus();
}

absl::StatusOr<bool> ControllerLink::Heartbeat(v1::WorkerState state) {
  v1::HeartbeatRequest request;
  request.set_worker_id(options_.worker_id);
  *request.mutable_load() = load_();
  request.set_state(state);
  grpc::ClientContext context;
  SetDeadline(context);
  v1::HeartbeatResponse response;
  if (absl::Status status = FromGrpcStatus(stub_->Heartbeat(&context, request, &response)); !status.ok()) {
    return status;
  }
  NoteReachable();
  if (response.heartbeat_interval_ms() > 0) {
    absl::MutexLock lock(&mu_);
    interval_ = absl::Milliseconds(response.heartbeat_interval_ms());
  }
  if (!response.unknown_worker()) ++heartbeats_;
  return response.unknown_worker();
}

void ControllerLink::Deregister() {
  v1::DeregisterWorkerRequest request;
  request.set_worker_id(options_.worker_id);
  grpc::ClientContext context;
  SetDeadline(context);
  v1::DeregisterWorkerResponse response;
  const absl::Status status = FromGrpcStatus(stub_->DeregisterWorker(&context, request, &response));
  if (status.ok()) {
    LLMC_LOG(Info).With("controller", options_.controller_address) << "deregistered from the controller";
  } else {
    LLMC_LOG(Warning).With("controller", options_.controller_address) << "could not deregister: " << status;
  }
}

void ControllerLink::NoteReachable() {
  if (last_error_.empty()) return;
  last_error_.clear();
  LLMC_LOG(Info).With("controller", options_.controller_address) << "the controller is reachable again";
}

void ControllerLink::NoteFailure(const absl::Status& status) {
  const std::string error = status.ToString();
  if (error == last_error_) return;
  last_error_ = error;
  LLMC_LOG(Warning).With("controller", options_.controller_address)
      << "controller call failed (" << error << "); serving continues and the worker keeps retrying";
}

}  // namespace llmc::worker
