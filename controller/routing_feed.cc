#include "controller/routing_feed.h"

#include <vector>

#include "common/logging.h"

namespace llmc::controller {

// One gateway's WatchRouting stream. At most one write is in flight; what changes meanwhile goes out in
// the next update, computed when the write is done.
class RoutingFeed::WatchStream final : public grpc::ServerWriteReactor<v1::RoutingUpdate> {
 public:
  WatchStream(RoutingFeed& feed, uint64_t gateway_id) : feed_(feed), gateway_id_(gateway_id) {}

  // Writes what changed since the last update, unless a write is in flight or nothing changed.
  void SendChanges() {
    absl::MutexLock lock(&mu_);
    if (writing_ || finishing_) return;
    uint64_t version = 0;
    v1::RoutingUpdate update = feed_.registry_.Changes(gateway_id_, version_, version);
    // The first table after warming ends is whole, so the gateway drops the workers that never came back.
    if (warming_sent_ && !update.warming() && !update.full()) update = feed_.registry_.Changes(gateway_id_, 0, version);
    const bool empty = !update.full() && update.workers().empty() && update.removed_worker_ids().empty() &&
                       update.remote_picks().empty() && update.applied_report_seq() == applied_sent_;
    version_ = version;
    if (empty) return;
    if (update.full()) *update.mutable_settings() = feed_.settings_;
    applied_sent_ = update.applied_report_seq();
    warming_sent_ = update.warming();
    update_ = std::move(update);
    writing_ = true;
    StartWrite(&update_);
  }

  // Ends the stream with `status` once the write in flight (if any) is done.
  void End(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    finishing_ = true;
    if (writing_) {
      end_status_ = status;
      return;
    }
    Finish(status);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (finishing_) return Finish(end_status_);
    }
    if (!ok) return End(grpc::Status(grpc::StatusCode::CANCELLED, "the gateway went away"));
    SendChanges();
  }

  void OnCancel() override { End(grpc::Status(grpc::StatusCode::CANCELLED, "the gateway went away")); }

  void OnDone() override {
    feed_.Remove(this);
    delete this;
  }

 private:
  RoutingFeed& feed_;
  const uint64_t gateway_id_;
  absl::Mutex mu_;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // what the gateway has; 0 sends the whole table
  uint64_t applied_sent_ ABSL_GUARDED_BY(mu_) = 0;
  bool warming_sent_ ABSL_GUARDED_BY(mu_) = false;  // the last update said the controller was warming
  v1::RoutingUpdate update_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
};

RoutingFeed::RoutingFeed(WorkerRegistry& registry, v1::DispatchSettings settings, absl::Duration coalesce)
    : registry_(registry), settings_(std::move(settings)), coalesce_(coalesce) {}

RoutingFeed::~RoutingFeed() { Stop(); }

void RoutingFeed::Start() {
  thread_ = std::thread([this] { Loop(); });
}

grpc::ServerWriteReactor<v1::RoutingUpdate>* RoutingFeed::Watch(grpc::CallbackServerContext* context,
                                                                const v1::WatchRoutingRequest* request) {
  auto* stream = new WatchStream(*this, request->gateway_id());
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      stream->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the controller is shutting down"));
      return stream;
    }
    streams_.insert(stream);
    registry_.SetWatchers(streams_.size());
  }
  LLMC_LOG(Debug).With("peer", context->peer()) << "gateway watching the routing table";
  stream->SendChanges();
  return stream;
}

void RoutingFeed::Remove(WatchStream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
  registry_.SetWatchers(streams_.size());
}

size_t RoutingFeed::num_watchers() const {
  absl::MutexLock lock(&mu_);
  return streams_.size();
}

void RoutingFeed::Loop() {
  constexpr absl::Duration kIdleWait = absl::Milliseconds(100);
  uint64_t seen = 0;
  bool was_warming = true;
  while (!stop_.HasBeenNotified()) {
    const uint64_t version = registry_.AwaitChange(seen, kIdleWait);
    // The end of warming changes no version, but every gateway is sent the whole table then.
    const bool warming = registry_.warming();
    const bool warm_now = was_warming && !warming;
    was_warming = warming;
    if (version == seen && !warm_now) continue;
    // Changes come in bursts (a heartbeat, then the picks it frees up): one update carries the burst.
    if (stop_.WaitForNotificationWithTimeout(coalesce_)) break;
    seen = version;
    std::vector<WatchStream*> streams;
    {
      absl::MutexLock lock(&mu_);
      streams.assign(streams_.begin(), streams_.end());
      // A stream stays registered (so alive) until its OnDone, which takes mu_: hold it while sending.
      for (WatchStream* stream : streams) stream->SendChanges();
    }
  }
}

void RoutingFeed::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (WatchStream* stream : streams_) stream->End(grpc::Status::OK);
  }
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  const auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return streams_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&drained), absl::Seconds(5))) {
    LLMC_LOG(Warning) << streams_.size() << " routing watch streams did not end";
  }
}

}  // namespace llmc::controller
