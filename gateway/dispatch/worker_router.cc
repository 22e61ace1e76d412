#include "gateway/dispatch/worker_router.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_codes.h"
#include "gateway/dispatch/worker_channels.h"

namespace llmc::gateway {
namespace {

constexpr absl::Duration kControllerDeadline = absl::Seconds(1);

// UNAVAILABLE and DEADLINE_EXCEEDED from the transport mean the controller could not be asked; the
// cached table answers instead. (A controller's own UNAVAILABLE — no worker can take the model — ends up
// asking the cache too, which knows the same states and refuses the same way unless it is stale.)
bool ControllerUnreachable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kControllerDeadline));
}

}  // namespace

WorkerRouter::WorkerRouter(const std::string& controller_address, absl::Duration refresh_interval,
                           std::function<void(const std::vector<v1::WorkerInfo>&)> on_refresh)
    : stub_(v1::Controller::NewStub(MakeClusterChannel(controller_address))),
      refresh_interval_(refresh_interval),
      on_refresh_(std::move(on_refresh)) {}

WorkerRouter::~WorkerRouter() { Stop(); }

void WorkerRouter::Start() {
  Refresh();
  refresh_thread_ = std::thread([this] { RefreshLoop(); });
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
    while (!calls_mu_.AwaitWithTimeout(absl::Condition(&drained), 5 * kControllerDeadline)) {
      LLMC_LOG(Warning) << "stopping: waiting for " << calls_.size() << " controller calls to end";
    }
  }
  if (!refresh_thread_.joinable()) return;
  stop_.Notify();
  refresh_thread_.join();
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

void WorkerRouter::RefreshLoop() {
  while (!stop_.WaitForNotificationWithTimeout(refresh_interval_)) Refresh();
}

void WorkerRouter::Refresh() {
  grpc::ClientContext context;
  SetDeadline(context);
  v1::ListWorkersResponse response;
  const grpc::Status status = stub_->ListWorkers(&context, v1::ListWorkersRequest(), &response);
  if (!status.ok()) {
    LLMC_LOG(Debug) << "routing table not refreshed: " << status.error_message();
    return;  // keep the last known table
  }
  std::vector<v1::WorkerInfo> workers(response.workers().begin(), response.workers().end());
  if (on_refresh_) on_refresh_(workers);
  absl::MutexLock lock(&mu_);
  workers_ = std::move(workers);
  cache_picks_.clear();
}

bool WorkerRouter::HasReadyWorker() const {
  absl::MutexLock lock(&mu_);
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const v1::WorkerInfo& worker) { return worker.state() == v1::WORKER_STATE_READY; });
}

absl::StatusOr<PickedWorker> WorkerRouter::PickFromCache(const std::string& model,
                                                         const std::vector<std::string>& exclude) {
  absl::MutexLock lock(&mu_);
  bool known = false;
  const v1::WorkerInfo* best = nullptr;
  double best_load = 0;
  int ties = 0;
  for (const v1::WorkerInfo& worker : workers_) {
    const bool serves = std::any_of(worker.models().begin(), worker.models().end(),
                                    [&](const v1::ModelInfo& info) { return info.name() == model; });
    if (!serves) continue;
    known = true;
    if (worker.state() != v1::WORKER_STATE_READY ||
        std::find(exclude.begin(), exclude.end(), worker.worker_id()) != exclude.end()) {
      continue;
    }
    // Shortest queue, as the controller does, with the picks made here since the table was fetched.
    const double load = static_cast<double>(worker.load().num_waiting() + worker.load().num_running() +
                                            worker.picks_since_heartbeat() + cache_picks_[worker.worker_id()]) /
                        std::max<uint32_t>(1, worker.load().max_running());
    if (best == nullptr || load < best_load) {
      best = &worker;
      best_load = load;
      ties = 1;
    } else if (load == best_load && std::uniform_int_distribution<int>(0, ties++)(random_) == 0) {
      best = &worker;
    }
  }
  if (!known) return absl::NotFoundError(absl::StrCat("the model '", model, "' does not exist"));
  if (best == nullptr) {
    return absl::UnavailableError(absl::StrCat("no worker can take requests for '", model, "' right now"));
  }
  ++cache_picks_[best->worker_id()];
  return PickedWorker{best->worker_id(), best->address(), /*from_cache=*/true};
}

std::shared_ptr<PendingPick> WorkerRouter::Pick(const std::string& model,
                                                const std::vector<std::string>& exclude_worker_ids,
                                                const std::vector<uint64_t>& prefix_hashes, PickCallback done) {
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
      [this, call, model, exclude_worker_ids, done = std::move(done)](grpc::Status status) mutable {
        if (status.ok()) {
          done(PickedWorker{call->response.worker_id(), call->response.address(), /*from_cache=*/false});
        } else if (call->cancelled.load()) {
          done(absl::CancelledError("the pick was cancelled"));
        } else if (ControllerUnreachable(status)) {
          done(PickFromCache(model, exclude_worker_ids));
        } else {
          done(FromGrpcStatus(status));
        }
        done = nullptr;  // what the caller's callback holds goes while the router is still there
        EndCall(call);   // last: Stop may return and the router go away once it is done
      });
  return call;
}

std::vector<v1::ModelSummary> WorkerRouter::ModelsFromCache() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ModelSummary> models;
  for (const v1::WorkerInfo& worker : workers_) {
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
        } else {
          done(FromGrpcStatus(status));
        }
        done = nullptr;
        EndCall(call);
      });
}

}  // namespace llmc::gateway
