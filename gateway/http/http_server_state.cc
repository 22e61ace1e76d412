#include "gateway/http/http_server_state.h"

#include <utility>

namespace llmc::gateway {

HttpServerState::HttpServerState(HttpServerOptions options, std::shared_ptr<HttpObserver> observer)
    : options_(std::move(options)),
      router_(options_.api_keys, options_.cors_allow_origins),
      observer_(std::move(observer)) {}

bool HttpServerState::RunWhileOpen(absl::FunctionRef<void()> fn) {
  absl::MutexLock lock(&gate_mu_);
  if (!open_) return false;
  fn();
  return true;
}

bool HttpServerState::AddSession(HttpSession* session, std::weak_ptr<HttpSession> handle) {
  absl::MutexLock lock(&sessions_mu_);
  if (stopping_) return false;
  sessions_.emplace(session, std::move(handle));
  return true;
}

void HttpServerState::RemoveSession(HttpSession* session) {
  absl::MutexLock lock(&sessions_mu_);
  sessions_.erase(session);
}

std::vector<std::shared_ptr<HttpSession>> HttpServerState::BeginStop() {
  {
    absl::MutexLock lock(&gate_mu_);
    open_ = false;
  }
  std::vector<std::shared_ptr<HttpSession>> live;
  absl::MutexLock lock(&sessions_mu_);
  stopping_ = true;
  for (const auto& [pointer, handle] : sessions_) {
    if (auto session = handle.lock()) live.push_back(std::move(session));
  }
  return live;
}

}  // namespace llmc::gateway
