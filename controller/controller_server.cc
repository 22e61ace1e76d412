#include "controller/controller_server.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/grpc_server.h"
#include "common/internal_auth/internal_call_authenticator.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "grpcpp/health_check_service_interface.h"

namespace llmc::controller {
namespace {

constexpr char kServiceName[] = "llmc.v1.Controller";
// How long the routing feed lets changes gather before it sends them: gateways see a heartbeat within a
// couple of milliseconds, and a burst of reported picks costs one update, not one each.
constexpr absl::Duration kRoutingCoalesce = absl::Milliseconds(2);
// The largest message the controller takes: a full ReportPicks (4096 picks of 256 prefix hashes, ~9.5 MB)
// fits; registrations are far smaller (the registry refuses any past 64 KiB).
constexpr int kMaxControllerMessageBytes = 16 << 20;

// Several sweeps per heartbeat interval, so a worker expires at most a fraction of an interval late.
absl::Duration SweepInterval(absl::Duration heartbeat_interval) {
  return std::clamp(heartbeat_interval / 4, absl::Milliseconds(10), absl::Seconds(1));
}

}  // namespace

ControllerServer::ControllerServer(config::ControllerConfig config, const Clock& clock)
    : config_(std::move(config)),
      credentials_(internal_auth::LoadClusterCredentials(
          config_.internal_auth, std::getenv(internal_auth::kClusterSecretEnvironmentVariable))) {
  v1::DispatchSettings settings;
  settings.set_policy(config_.dispatch_policy);
  settings.set_prefix_weight(config_.prefix_weight);
  settings.set_load_weight(config_.load_weight);
  settings.set_kv_weight(config_.kv_weight);
  settings.set_prefix_index_entries(config_.prefix_index_entries);
  const dispatch::PrefixAwareWeights defaults;
  settings.set_tokens_per_hash(defaults.tokens_per_hash);
  settings.set_queue_tokens(defaults.queue_tokens);
  // The configuration was validated, so the policy name is known.
  auto policy = dispatch::MakeDispatchPolicy(settings, config_.dispatch_seed);
  registry_ =
      std::make_unique<WorkerRegistry>(clock, config_.expiry_after(), std::move(policy).value(), config_.max_workers);
  // Workers of a previous controller come back on their next heartbeat: until then the table is partial.
  registry_->StartWarming(config_.effective_routing_warmup());
  metrics_ = std::make_unique<ControllerMetrics>(*registry_, config_.dispatch_policy);
  feed_ = std::make_unique<RoutingFeed>(*registry_, std::move(settings), kRoutingCoalesce);
  internal_auth::InternalCallAuthenticator authenticator(credentials_.ok() ? credentials_->secret : "");
  service_ = std::make_unique<ControllerService>(*registry_, *metrics_, *feed_, config_.heartbeat_interval,
                                                 std::move(authenticator));
}

ControllerServer::~ControllerServer() { Shutdown(); }

absl::Status ControllerServer::Start() {
  RETURN_IF_ERROR(credentials_.status());
  RETURN_IF_ERROR(internal_auth::CheckInternalExposure(*credentials_, config_.internal_auth, config_.listen_address));
  GrpcServerOptions grpc_options;
  grpc_options.credentials = internal_auth::InternalServerCredentials(*credentials_);
  grpc_options.max_receive_message_bytes = kMaxControllerMessageBytes;
  ASSIGN_OR_RETURN(StartedGrpcServer started, StartGrpcServer(config_.listen_address, *service_, grpc_options));
  server_ = std::move(started.server);
  grpc_address_ = started.address;

  if (!config_.metrics_address.empty()) {
    metrics_server_ = std::make_unique<MetricsHttpServer>(metrics_->prometheus_registry(), [this] {
      metrics_->RefreshWorkerGauges();
      metrics_->SetRoutingWatchers(feed_->num_watchers());
    });
    ASSIGN_OR_RETURN(metrics_address_, metrics_server_->Start(config_.metrics_address));
  }
  sweep_thread_ = std::thread([this] { SweepLoop(); });
  feed_->Start();

  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(kServiceName, true);
  health->SetServingStatus(true);
  LLMC_LOG(Info)
          .With("grpc", grpc_address_.ToString())
          .With("metrics", metrics_server_ ? metrics_address_.ToString() : "off")
          .With("policy", config_.dispatch_policy)
          .With("heartbeat_interval", absl::FormatDuration(config_.heartbeat_interval))
          .With("expiry_after", absl::FormatDuration(config_.expiry_after()))
          .With("internal_auth", internal_auth::InternalAuthSummary(*credentials_))
      << "controller listening";
  return absl::OkStatus();
}

void ControllerServer::SweepLoop() {
  const absl::Duration interval = SweepInterval(config_.heartbeat_interval);
  while (!stop_sweep_.WaitForNotificationWithTimeout(interval)) {
    const std::vector<std::string> expired = registry_->ExpireSilent();
    if (expired.empty()) continue;
    metrics_->CountExpired(expired.size());
    for (const auto& worker_id : expired) {
      LLMC_LOG(Warning).With("worker_id", worker_id)
          << "worker expired after " << config_.expiry_missed_heartbeats << " missed heartbeats";
    }
  }
}

void ControllerServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // The watch streams are the only calls that outlive their handler: end them first.
  feed_->Stop();
  if (server_) {
    server_->GetHealthCheckService()->SetServingStatus(false);
    // Every handler finishes its call before returning, so nothing is ever left in flight to wait for.
    // An immediate deadline matters because gRPC otherwise holds Shutdown until the deadline whenever a
    // client (a gateway, a worker) keeps an idle connection open.
    server_->Shutdown(std::chrono::system_clock::now());
  }
  if (sweep_thread_.joinable()) {
    stop_sweep_.Notify();
    sweep_thread_.join();
  }
  if (metrics_server_) metrics_server_->Stop();
  if (server_) {
    server_->Wait();
    LLMC_LOG(Info) << "controller stopped";
  }
}

}  // namespace llmc::controller
