#include "controller/controller_service.h"

#include <algorithm>

#include "common/grpc_server.h"
#include "common/logging.h"
#include "common/prefix_hash.h"
#include "common/status_codes.h"
#include "dispatch/worker_pick.h"

namespace llmc::controller {
ControllerService::ControllerService(WorkerRegistry& registry, ControllerMetrics& metrics, RoutingFeed& feed,
                                     absl::Duration heartbeat_interval,
                                     internal_auth::InternalCallAuthenticator authenticator)
    : registry_(registry),
      metrics_(metrics),
      feed_(feed),
      heartbeat_interval_ms_(static_cast<uint32_t>(absl::ToInt64Milliseconds(heartbeat_interval))),
      authenticator_(std::move(authenticator)) {}

grpc::ServerUnaryReactor* ControllerService::RegisterWorker(grpc::CallbackServerContext* context,
                                                            const v1::RegisterWorkerRequest* request,
                                                            v1::RegisterWorkerResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  const absl::Status status = registry_.Register(*request, internal_auth::PeerHost(context->peer()));
  metrics_.CountRegistration(status);
  if (status.ok()) {
    std::string models;
    for (const auto& model : request->models()) models += (models.empty() ? "" : ",") + model.name();
    LLMC_LOG(Info).With("worker_id", request->worker_id()).With("address", request->address()).With("models", models)
        << "worker registered";
    response->set_heartbeat_interval_ms(heartbeat_interval_ms_);
  } else {
    LLMC_LOG(Warning).With("worker_id", request->worker_id()).With("peer", context->peer())
        << "registration refused: " << status.message();
  }
  return FinishUnary(context, status);
}

grpc::ServerUnaryReactor* ControllerService::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  const absl::StatusOr<HeartbeatOutcome> outcome =
      registry_.Heartbeat(*request, internal_auth::PeerHost(context->peer()));
  if (!outcome.ok()) return FinishUnary(context, outcome.status());
  const bool known = *outcome == HeartbeatOutcome::kAccepted;
  metrics_.CountHeartbeat(known);
  if (!known) {
    LLMC_LOG(Info).With("worker_id", request->worker_id()) << "heartbeat from unknown worker: asked to register";
  }
  response->set_unknown_worker(!known);
  response->set_heartbeat_interval_ms(heartbeat_interval_ms_);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ControllerService::DeregisterWorker(grpc::CallbackServerContext* context,
                                                              const v1::DeregisterWorkerRequest* request,
                                                              v1::DeregisterWorkerResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  const absl::StatusOr<bool> was_registered =
      registry_.Deregister(request->worker_id(), internal_auth::PeerHost(context->peer()));
  if (!was_registered.ok()) {
    LLMC_LOG(Warning).With("worker_id", request->worker_id()).With("peer", context->peer())
        << "deregistration refused: " << was_registered.status().message();
    return FinishUnary(context, was_registered.status());
  }
  response->set_was_registered(*was_registered);
  LLMC_LOG(Info).With("worker_id", request->worker_id()) << "worker deregistered";
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ControllerService::PickWorker(grpc::CallbackServerContext* context,
                                                        const v1::PickWorkerRequest* request,
                                                        v1::PickWorkerResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  if (request->model().empty()) return FinishUnary(context, absl::InvalidArgumentError("model must not be empty"));
  const absl::flat_hash_set<std::string> excluded(request->exclude_worker_ids().begin(),
                                                  request->exclude_worker_ids().end());
  // More hashes than a gateway sends would only flush the index and hold the registry's lock longer.
  const auto& hashes = request->prefix_hashes();
  const absl::Span<const uint64_t> prefix_hashes(hashes.data(), std::min<size_t>(hashes.size(), kMaxPrefixChunks));
  absl::StatusOr<PickedWorker> picked = registry_.Pick(request->model(), excluded, prefix_hashes);
  metrics_.CountPick(request->model(), picked.status());
  if (!picked.ok()) return FinishUnary(context, picked.status());
  response->set_worker_id(picked->worker_id);
  response->set_address(picked->address);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ControllerService::ListModels(grpc::CallbackServerContext* context,
                                                        const v1::ListModelsRequest* request,
                                                        v1::ListModelsResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  for (auto& summary : registry_.ListModels()) *response->add_models() = std::move(summary);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ControllerService::ListWorkers(grpc::CallbackServerContext* context,
                                                         const v1::ListWorkersRequest* request,
                                                         v1::ListWorkersResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  for (auto& worker : registry_.ListWorkers(request->model())) *response->add_workers() = std::move(worker);
  response->set_policy(std::string(registry_.policy_name()));
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerWriteReactor<v1::RoutingUpdate>* ControllerService::WatchRouting(grpc::CallbackServerContext* context,
                                                                             const v1::WatchRoutingRequest* request) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) {
    return RefuseStream<v1::RoutingUpdate>(auth);
  }
  return feed_.Watch(context, request);
}

grpc::ServerUnaryReactor* ControllerService::ReportPicks(grpc::CallbackServerContext* context,
                                                         const v1::ReportPicksRequest* request,
                                                         v1::ReportPicksResponse* response) {
  if (absl::Status auth = authenticator_.Check(*context); !auth.ok()) return FinishUnary(context, auth);
  // A gateway reports what it picked while its previous report was in flight (a millisecond or so); more
  // than this is a broken peer, and would hold the registry's mutex too long.
  if (request->picks_size() > dispatch::kMaxPicksPerReport) {
    return FinishUnary(context, absl::InvalidArgumentError("too many picks in one report"));
  }
  for (const v1::ReportedPick& pick : request->picks()) {
    if (pick.prefix_hashes_size() > static_cast<int>(kMaxPrefixChunks)) {
      return FinishUnary(context, absl::InvalidArgumentError("a reported pick has too many prefix hashes"));
    }
  }
  metrics_.CountGatewayPicks(registry_.ApplyReportedPicks(*request));
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace llmc::controller
