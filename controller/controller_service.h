#ifndef LLMC_CONTROLLER_CONTROLLER_SERVICE_H_
#define LLMC_CONTROLLER_CONTROLLER_SERVICE_H_

#include <cstdint>

#include "common/internal_auth/internal_call_authenticator.h"
#include "controller/controller_metrics.h"
#include "controller/routing_feed.h"
#include "controller/worker_registry.h"
#include "llmc/v1/controller.grpc.pb.h"

namespace llmc::controller {

// The Controller gRPC service (callback API). Every unary RPC is a short registry operation finished on the
// calling gRPC thread; WatchRouting streams are served by the RoutingFeed. Nothing here waits on a worker.
// Every RPC is refused UNAUTHENTICATED unless `authenticator` accepts it; registrations are bound to the
// calling host.
class ControllerService final : public v1::Controller::CallbackService {
 public:
  ControllerService(WorkerRegistry& registry, ControllerMetrics& metrics, RoutingFeed& feed,
                    absl::Duration heartbeat_interval, internal_auth::InternalCallAuthenticator authenticator = {});

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* context,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* DeregisterWorker(grpc::CallbackServerContext* context,
                                             const v1::DeregisterWorkerRequest* request,
                                             v1::DeregisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* PickWorker(grpc::CallbackServerContext* context, const v1::PickWorkerRequest* request,
                                       v1::PickWorkerResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context, const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context, const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerWriteReactor<v1::RoutingUpdate>* WatchRouting(grpc::CallbackServerContext* context,
                                                            const v1::WatchRoutingRequest* request) override;
  grpc::ServerUnaryReactor* ReportPicks(grpc::CallbackServerContext* context, const v1::ReportPicksRequest* request,
                                        v1::ReportPicksResponse* response) override;

 private:
  WorkerRegistry& registry_;
  ControllerMetrics& metrics_;
  RoutingFeed& feed_;
  const uint32_t heartbeat_interval_ms_;
  const internal_auth::InternalCallAuthenticator authenticator_;
};

}  // namespace llmc::controller

#endif  // LLMC_CONTROLLER_CONTROLLER_SERVICE_H_
