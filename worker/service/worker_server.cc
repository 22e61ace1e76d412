#include "worker/service/worker_server.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_server.h"
#include "common/internal_auth/internal_call_authenticator.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "grpcpp/health_check_service_interface.h"
#include "worker/model/cpu/cpu_isa.h"
#include "worker/model/loaded_model.h"
#include "worker/service/served_model.h"

namespace llmc::worker {
namespace {

constexpr char kServiceName[] = "llmc.v1.Worker";
constexpr absl::Duration kDrainPoll = absl::Milliseconds(20);
// After the grace period, time for the last statuses (and aborts) to reach the clients.
constexpr absl::Duration kFinalFlush = absl::Seconds(1);

engine::EngineOptions ToEngineOptions(const config::WorkerConfig& config) {
  engine::EngineOptions options;
  options.kv_cache_bytes = static_cast<int64_t>(config.kv_cache_bytes);
  options.kv_cache_memory_fraction = config.kv_cache_memory_fraction;
  options.block_size = config.block_size;
  options.max_num_batched_tokens = config.max_num_batched_tokens;
  options.max_running = config.max_running;
  options.max_waiting = config.max_waiting;
  options.max_model_len = config.max_model_len;
  options.max_consecutive_failed_steps = config.max_consecutive_failed_steps;
  options.enable_prefix_caching = config.enable_prefix_caching;
  return options;
}

}  // namespace

WorkerServer::WorkerServer(config::WorkerConfig config)
    : config_(std::move(config)), worker_id_(config_.worker_id.empty() ? DefaultWorkerId() : config_.worker_id) {}

WorkerServer::~WorkerServer() { Drain(); }

absl::Status WorkerServer::Start() {
  ScopedLogContext log_context("worker_id", worker_id_);
  if (config_.num_threads > 0) at::set_num_threads(static_cast<int>(config_.num_threads));
  ASSIGN_OR_RETURN(credentials_,
                   internal_auth::LoadClusterCredentials(
                       config_.internal_auth, std::getenv(internal_auth::kClusterSecretEnvironmentVariable)));
  RETURN_IF_ERROR(internal_auth::CheckInternalExposure(credentials_, config_.internal_auth, config_.listen_address));
  RETURN_IF_ERROR(LoadEngine());
  RETURN_IF_ERROR(StartGrpc());
  if (!config_.metrics_address.empty()) {
    metrics_server_ = std::make_unique<MetricsHttpServer>(metrics_->prometheus_registry(), [this] {
      metrics_->RefreshLoad(engine_->Load());
      metrics_->SetStreamQueuedBytes(service_ ? service_->stream_queued_bytes() : 0);
    });
    ASSIGN_OR_RETURN(metrics_address_, metrics_server_->Start(config_.metrics_address));
  }

  // On the engine's delivery thread, once: out of rotation everywhere at once.
  engine_->SetUnhealthyListener([this](const absl::Status& status) {
    LLMC_LOG(Error) << "leaving rotation: " << status.message();
    service_->SetState(v1::WORKER_STATE_UNHEALTHY);
    SetHealth(false);
    absl::MutexLock lock(&link_mu_);
    if (link_) link_->SetState(v1::WORKER_STATE_UNHEALTHY);
  });
  const absl::Time warm_up_start = absl::Now();
  RETURN_IF_ERROR(Annotate(engine_->Start(), "engine warm-up"));
  LLMC_LOG(Info) << "engine warmed up in " << absl::FormatDuration(absl::Now() - warm_up_start);
  service_->SetState(v1::WORKER_STATE_READY);
  SetHealth(true);
  if (!engine_->Health().ok()) {  // the listener may have run between the two lines above
    service_->SetState(v1::WORKER_STATE_UNHEALTHY);
    SetHealth(false);
  }

  const std::string advertised = AdvertisedAddress();
  if (!config_.controller_address.empty()) {
    ControllerLinkOptions options{config_.controller_address, worker_id_, advertised, config_.heartbeat_interval};
    options.credentials = credentials_;
    absl::MutexLock lock(&link_mu_);
    link_ = std::make_unique<ControllerLink>(std::move(options), service_->model().info,
                                             [this] { return ToWorkerLoad(engine_->Load()); });
    if (!engine_->Health().ok()) link_->SetState(v1::WORKER_STATE_UNHEALTHY);
    link_->Start();
  }
  LLMC_LOG(Info)
          .With("grpc", grpc_address_.ToString())
          .With("advertised", advertised)
          .With("metrics", metrics_server_ ? metrics_address_.ToString() : "off")
          .With("controller", config_.controller_address.empty() ? "off" : config_.controller_address)
          .With("internal_auth", internal_auth::InternalAuthSummary(credentials_))
          .With("model", service_->model().name())
          .With("device", engine_->device())
          .With("dtype", engine_->dtype())
      << "worker ready";
  return absl::OkStatus();
}

absl::Status WorkerServer::LoadEngine() {
  const absl::Time start = absl::Now();
  LLMC_LOG(Info).With("path", config_.model_path).With("device", config_.device) << "loading model";
  ASSIGN_OR_RETURN(tokenizer_, tokenizer::Tokenizer::FromFile(config_.model_path + "/tokenizer.json"));
  absl::StatusOr<std::unique_ptr<model::LoadedModel>> model = model::LoadedModel::Load(
      config_.model_path,
      {config_.device, config_.dtype, config_.quantization, static_cast<int64_t>(config_.quantization_group_size)});
  if (!model.ok()) return Annotate(model.status(), absl::StrCat("loading ", config_.model_path));
  const std::string name = config_.model_name.empty() ? (*model)->manifest().name : config_.model_name;
  ASSIGN_OR_RETURN(const MetricNames metric_names, ParseMetricNames(config_.metric_names));
  metrics_ = std::make_unique<WorkerMetrics>(name, metric_names);
  ASSIGN_OR_RETURN(engine_,
                   engine::Engine::Create(*std::move(model), *tokenizer_, ToEngineOptions(config_), metrics_.get()));
  if (engine_->device() == "cpu") {
    for (const std::string& problem : model::cpu::KernelEnvironmentProblems()) LLMC_LOG(Warning) << problem;
    LLMC_LOG(Info) << "CPU kernels: " << model::cpu::DescribeCpu();
  }
  metrics_->SetModelInfo(engine_->dtype(), engine_->manifest().quantization, engine_->device());
  metrics_->SetCacheConfig(static_cast<int64_t>(config_.block_size), engine_->Load().num_kv_blocks, engine_->dtype());
  ServedModel served = MakeServedModel(*engine_, *tokenizer_, name);
  RETURN_IF_ERROR(LoadPackageChatTemplate(config_.model_path, engine_->manifest(), served));
  served.trust_request_chat_template = config_.trust_request_chat_template;
  if (!config_.default_chat_template_kwargs.empty()) {
    served.default_chat_template_kwargs = nlohmann::ordered_json::parse(config_.default_chat_template_kwargs);
  }
  RETURN_IF_ERROR(ApplyOutputFormatOverrides(config_.tool_call_parser, config_.reasoning_parser, served));
  const std::string tool_call_format(typed_output::ToolCallFormatName(served.tool_call_format));
  const std::string reasoning =
      served.reasoning.enabled() ? absl::StrCat(served.reasoning.start, "...", served.reasoning.end) : "none";
  ConstraintCompilerOptions constraint_options;
  constraint_options.json_max_whitespace = config_.json_max_whitespace;
  service_ = std::make_unique<WorkerService>(*engine_, std::move(served), worker_id_, config_.request_timeout,
                                             constraint_options,
                                             internal_auth::InternalCallAuthenticator(credentials_.secret));
  service_->constraints().set_compile_observer(
      [metrics = metrics_.get()](absl::Duration compile_time) { metrics->OnGrammarCompile(compile_time); });
  LLMC_LOG(Info)
          .With("model", name)
          .With("max_model_len", absl::StrCat(engine_->max_model_len()))
          .With("tool_call_format", tool_call_format)
          .With("reasoning", reasoning)
      << "model loaded in " << absl::FormatDuration(absl::Now() - start);
  return absl::OkStatus();
}

absl::Status WorkerServer::StartGrpc() {
  GrpcServerOptions options;
  options.credentials = internal_auth::InternalServerCredentials(credentials_);
  ASSIGN_OR_RETURN(StartedGrpcServer started, StartGrpcServer(config_.listen_address, *service_, options));
  server_ = std::move(started.server);
  grpc_address_ = started.address;
  // The default health service starts out SERVING for ""; not ready until the warm-up has run.
  SetHealth(false);
  return absl::OkStatus();
}

void WorkerServer::SetHealth(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(kServiceName, serving);
  health->SetServingStatus(serving);
}

std::string WorkerServer::AdvertisedAddress() const {
  if (!config_.advertised_address.empty()) return config_.advertised_address;
  HostPort address = grpc_address_;
  // A wildcard cannot be dialled; loopback is right for one machine, other setups set advertised_address.
  if (address.host == "0.0.0.0" || address.host == "::" || address.host.empty()) address.host = "127.0.0.1";
  return address.ToString();
}

void WorkerServer::Drain() {
  if (drained_) return;
  drained_ = true;
  ScopedLogContext log_context("worker_id", worker_id_);
  const absl::Time deadline = absl::Now() + config_.drain_grace_period;
  if (server_) SetHealth(false);
  if (service_) service_->SetState(v1::WORKER_STATE_DRAINING);
  if (link_) link_->SetState(v1::WORKER_STATE_DRAINING);
  if (engine_) {
    engine_->StopAccepting();
    // A stream is done when its last message and status went out, which is after the engine let go of it.
    auto busy = [this] { return engine_->NumUnfinished() > 0 || (service_ && service_->live_streams() > 0); };
    if (busy()) {
      LLMC_LOG(Info) << "draining: waiting up to " << absl::FormatDuration(config_.drain_grace_period) << " for "
                     << engine_->NumUnfinished() << " requests";
    }
    while (busy() && absl::Now() < deadline) absl::SleepFor(kDrainPoll);
    if (const int64_t left = engine_->NumUnfinished(); left > 0) {
      LLMC_LOG(Warning) << "drain grace period over: aborting " << left << " requests";
    }
    engine_->Stop();
    const absl::Time flush_deadline = absl::Now() + kFinalFlush;
    while (busy() && absl::Now() < flush_deadline) absl::SleepFor(kDrainPoll);
  }
  if (link_) link_->Stop(/*deregister=*/true);
  if (metrics_server_) metrics_server_->Stop();
  if (server_) {
    // Every stream has ended or had its chance; an immediate deadline also keeps gRPC from waiting on
    // clients that hold idle connections open.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  if (engine_) {
    LLMC_LOG(Info) << "worker stopped";
  }
}

}  // namespace llmc::worker
