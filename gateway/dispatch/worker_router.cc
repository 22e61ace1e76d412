#include "gateway/dispatch/worker_router.h"

#include <algorithm>
#include <atomic>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "gateway/dispatch/internal_auth_failure.h"
#include "gateway/dispatch/worker_channels.h"

namespace llmc::gateway {
namespace {

constexpr absl::Duration kFirstRetry = absl::Milliseconds(50);

uint64_t RandomGatewayId() {
  std::random_device random;
  return (static_cast<uint64_t>(random()) << 32) | random();
}

// Answers nothing: a pick from the routing table has already been answered when Pick returns.
struct AnsweredPick : PendingPick {
  void Cancel() override {}
};

// UNAVAILABLE and DEADLINE_EXCEEDED from the transport mean the controller could not be asked; the
// cached table answers instead. (A controller's own UNAVAILABLE — no worker can take the model — ends up
// asking the cache too, which knows the same states and refuses the same way unless it is stale.)
bool ControllerUnreachable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

WorkerRouter::WorkerRouter(const std::string& controller_address, absl::Duration retry_interval,
                           std::function<void(const std::vector<v1::WorkerInfo>&)> on_refresh,
                           absl::Duration controller_deadline, const internal_auth::ClusterCredentials& credentials)
    : stub_(v1::Controller::NewStub(MakeClusterChannel(controller_address, credentials))),
      retry_interval_(retry_interval),
      controller_deadline_(controller_deadline),
      on_refresh_(std::move(on_refresh)),
      replica_(RandomGatewayId(), /*seed=*/0) {}

WorkerRouter::~WorkerRouter() { Stop(); }

void WorkerRouter::SetDeadline(grpc::ClientContext& context) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + controller_deadline_));
}

void WorkerRouter::Start() {
  watch_thread_ = std::thread([this] { WatchLoop(); });
  // The first requests find a table when the controller answers promptly; otherwise they ask it.
  first_table_.WaitForNotificationWithTimeout(controller_deadline_);
}

// A unary call to the controller in flight: its context (for cancellation) and messages.
struct WorkerRouter::AsyncCall : PendingPick {
  grpc::ClientContext context;
  std::atomic<bool> cancelled{false};
  void Cancel() override {
    cancelled.store(true);
    context.TryCancel();
  }
};

void WorkerRouter::Stop() {
  std::vector<std::shared_ptr<AsyncCall>> in_flight;
  {
    absl::MutexLock lock(&calls_mu_);
    stopping_ = true;
    in_flight.assign(calls_.begin(), calls_.end());
  }
  for (const auto& call : in_flight) call->Cancel();
  {
    // gRPC answers every call (cancelled ones at once, the rest by their deadline); their callbacks use
    // this object, so the wait is not cut short.
    absl::MutexLock lock(&calls_mu_);
    const auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(calls_mu_) { return calls_.empty(); };
    while (!calls_mu_.AwaitWithTimeout(absl::Condition(&drained), 5 * controller_deadline_)) {
      LLMC_LOG(Warning) << "stopping: waiting for " << calls_.size() << " controller calls to end";
    }
  }
  if (!watch_thread_.joinable()) return;
  {
    absl::MutexLock lock(&watch_mu_);
    stop_.Notify();
    if (watch_context_ != nullptr) watch_context_->TryCancel();
  }
  watch_thread_.join();
}

bool WorkerRouter::BeginCall(const std::shared_ptr<AsyncCall>& call) {
  absl::MutexLock lock(&calls_mu_);
  if (stopping_) return false;
  calls_.insert(call);
  return true;
}

void WorkerRouter::EndCall(const std::shared_ptr<AsyncCall>& call) {
  absl::MutexLock lock(&calls_mu_);
  calls_.erase(call);
}

void WorkerRouter::WatchLoop() {
  absl::Duration retry = kFirstRetry;
  v1::WatchRoutingRequest request;
  request.set_gateway_id(replica_.gateway_id());
  while (!stop_.HasBeenNotified()) {
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&watch_mu_);
      if (stop_.HasBeenNotified()) break;
      watch_context_ = &context;
    }
    std::unique_ptr<grpc::ClientReader<v1::RoutingUpdate>> reader = stub_->WatchRouting(&context, request);
    v1::RoutingUpdate update;
    while (reader->Read(&update)) {
      const bool moved = replica_.Apply(update);
      if (update.full()) {
        watching_.store(replica_.has_table());
        if (refused_.exchange(false)) {
          LLMC_LOG(Info) << "the controller accepts the gateway's credentials again";
        }
        if (replica_.has_table() && !first_table_.HasBeenNotified()) first_table_.Notify();
        retry = kFirstRetry;
      }
      if (on_refresh_ && moved) on_refresh_(replica_.Workers());
    }
    watching_.store(false);
    const grpc::Status status = reader->Finish();
    {
      absl::MutexLock lock(&watch_mu_);
      watch_context_ = nullptr;
    }
    if (IsInternalAuthFailure(status)) {
      // Logged once until the controller accepts the gateway again: it retries every retry_interval.
      if (!refused_.exchange(true)) {
        InternalAuthFailure("the controller", "the controller (watching the routing table)", status).IgnoreError();
      }
    } else {
      LLMC_LOG(Debug) << "routing table stream ended (" << status.error_message() << "); watching again in "
                      << absl::FormatDuration(retry);
    }
    stop_.WaitForNotificationWithTimeout(retry);
    retry = std::min(retry * 2, retry_interval_);
  }
}

void WorkerRouter::SendReport() {
  struct ReportCall : AsyncCall {
    v1::ReportPicksRequest request;
    v1::ReportPicksResponse response;
  };
  std::shared_ptr<ReportCall> call;
  {
    absl::MutexLock lock(&report_mu_);
    if (report_in_flight_) return;
    std::optional<v1::ReportPicksRequest> report = replica_.TakeReport();
    if (!report.has_value()) return;
    call = std::make_shared<ReportCall>();
    call->request = std::move(*report);
    report_in_flight_ = true;
  }
  if (!BeginCall(call)) {
    replica_.ReportDone(call->request.seq(), /*applied=*/false);
    return;
  }
  SetDeadline(call->context);
  stub_->async()->ReportPicks(&call->context, &call->request, &call->response, [this, call](grpc::Status status) {
    if (!status.ok()) {
      LLMC_LOG(Debug) << "picks not reported: " << status.error_message();
    }
    replica_.ReportDone(call->request.seq(), status.ok());
    {
      absl::MutexLock lock(&report_mu_);
      report_in_flight_ = false;
    }
    SendReport();   // what gathered meanwhile
    EndCall(call);  // last: Stop may return and the router go away once it is done
  });
}

bool WorkerRouter::HasReadyWorker() const {
  const std::vector<v1::WorkerInfo> workers = replica_.Workers();
  return std::any_of(workers.begin(), workers.end(),
                     [](const v1::WorkerInfo& worker) { return worker.state() == v1::WORKER_STATE_READY; });
}

std::shared_ptr<PendingPick> WorkerRouter::Pick(const std::string& model,
                                                const std::vector<std::string>& exclude_worker_ids,
                                                const std::vector<uint64_t>& prefix_hashes, PickCallback done) {
  {
    absl::MutexLock lock(&calls_mu_);
    if (stopping_) {
      done(absl::UnavailableError("the gateway is shutting down"));
      return std::make_shared<AnsweredPick>();
    }
  }
  const bool watching = watching_.load();
  if (replica_.has_table()) {
    absl::StatusOr<PickedWorker> picked = replica_.Pick(model, exclude_worker_ids, prefix_hashes);
    // A table that cannot place the request may be behind a registration: the controller knows.
    if (picked.ok() || !watching) {
      if (picked.ok()) picked->from_cache = !watching;
      done(std::move(picked));
      SendReport();
      return std::make_shared<AnsweredPick>();
    }
  }
  return AskController(model, exclude_worker_ids, prefix_hashes, std::move(done));
}

std::shared_ptr<PendingPick> WorkerRouter::AskController(const std::string& model,
                                                         const std::vector<std::string>& exclude_worker_ids,
                                                         const std::vector<uint64_t>& prefix_hashes,
                                                         PickCallback done) {
  struct PickCall : AsyncCall {
    v1::PickWorkerRequest request;
    v1::PickWorkerResponse response;
  };
  auto call = std::make_shared<PickCall>();
  if (!BeginCall(call)) {
    done(absl::UnavailableError("the gateway is shutting down"));
    return call;
  }
  SetDeadline(call->context);
  call->request.set_model(model);
  for (const auto& id : exclude_worker_ids) call->request.add_exclude_worker_ids(id);
  call->request.mutable_prefix_hashes()->Add(prefix_hashes.begin(), prefix_hashes.end());
  stub_->async()->PickWorker(
      &call->context, &call->request, &call->response,
      [this, call, model, exclude_worker_ids, prefix_hashes, done = std::move(done)](grpc::Status status) mutable {
        if (status.ok()) {
          done(PickedWorker{call->response.worker_id(), call->response.address(), /*from_cache=*/false});
        } else if (call->cancelled.load()) {
          done(absl::CancelledError("the pick was cancelled"));
        } else if (ControllerUnreachable(status) && replica_.has_table()) {
          absl::StatusOr<PickedWorker> picked = replica_.Pick(model, exclude_worker_ids, prefix_hashes);
          if (picked.ok()) picked->from_cache = true;
          done(std::move(picked));
        } else if (IsInternalAuthFailure(status)) {
          done(InternalAuthFailure("the controller", "the controller (PickWorker)", status));
        } else {
          done(FromGrpcStatus(status));
        }
        done = nullptr;  // what the caller's callback holds goes while the router is still there
        EndCall(call);   // last: Stop may return and the router go away once it is done
      });
  return call;
}

std::vector<v1::ModelSummary> WorkerRouter::ModelsFromCache() const {
  std::vector<v1::ModelSummary> models;
  for (const v1::WorkerInfo& worker : replica_.Workers()) {
    for (const v1::ModelInfo& info : worker.models()) {
      auto it = std::find_if(models.begin(), models.end(),
                             [&](const v1::ModelSummary& summary) { return summary.info().name() == info.name(); });
      if (it == models.end()) {
        models.emplace_back();
        *models.back().mutable_info() = info;
        it = models.end() - 1;
      }
      it->set_num_workers(it->num_workers() + 1);
      if (worker.state() == v1::WORKER_STATE_READY) it->set_num_ready(it->num_ready() + 1);
    }
  }
  return models;
}

void WorkerRouter::ListModels(ModelsCallback done) {
  struct ListCall : AsyncCall {
    v1::ListModelsRequest request;
    v1::ListModelsResponse response;
  };
  auto call = std::make_shared<ListCall>();
  if (!BeginCall(call)) return done(absl::UnavailableError("the gateway is shutting down"));
  SetDeadline(call->context);
  stub_->async()->ListModels(
      &call->context, &call->request, &call->response,
      [this, call, done = std::move(done)](grpc::Status status) mutable {
        if (status.ok()) {
          done(std::vector<v1::ModelSummary>(call->response.models().begin(), call->response.models().end()));
        } else if (call->cancelled.load()) {
          done(absl::CancelledError("the gateway is shutting down"));
        } else if (ControllerUnreachable(status)) {
          done(ModelsFromCache());
        } else if (IsInternalAuthFailure(status)) {
          done(InternalAuthFailure("the controller", "the controller (ListModels)", status));
        } else {
          done(FromGrpcStatus(status));
        }
        done = nullptr;
        EndCall(call);
      });
}

}  // namespace llmc::gateway
