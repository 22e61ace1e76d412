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

bool HttpServerState::TryOpenConnection() {
  uint32_t open = connections_.load(std::memory_order_relaxed);
  do {
    if (open >= options_.max_connections) return false;
  } while (!connections_.compare_exchange_weak(open, open + 1, std::memory_order_relaxed));
  return true;
}

void HttpServerState::ConnectionClosed() { connections_.fetch_sub(1, std::memory_order_relaxed); }

bool HttpServerState::TryReserveBody(uint64_t bytes) {
  uint64_t reserved = body_bytes_.load(std::memory_order_relaxed);
  do {
    if (bytes > options_.max_inflight_body_bytes || reserved > options_.max_inflight_body_bytes - bytes) return false;
  } while (!body_bytes_.compare_exchange_weak(reserved, reserved + bytes, std::memory_order_relaxed));
  if (observer_ != nullptr) observer_->OnBodyBytesReserved(static_cast<int64_t>(bytes));
  return true;
}

void HttpServerState::ReleaseBody(uint64_t bytes) {
  body_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  if (observer_ != nullptr) observer_->OnBodyBytesReserved(-static_cast<int64_t>(bytes));
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
