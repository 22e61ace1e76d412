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

void HttpServerState::RequestStarted() {
  absl::MutexLock lock(&requests_mu_);
  ++requests_;
}

void HttpServerState::RequestEnded() {
  absl::MutexLock lock(&requests_mu_);
  --requests_;
}

bool HttpServerState::AwaitNoRequests(absl::Time deadline) {
  absl::MutexLock lock(&requests_mu_);
  const auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(requests_mu_) { return requests_ == 0; };
  return requests_mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

int64_t HttpServerState::requests_in_flight() {
  absl::MutexLock lock(&requests_mu_);
  return requests_;
}

std::vector<std::shared_ptr<HttpSession>> HttpServerState::BeginDrain() {
  absl::MutexLock lock(&sessions_mu_);
  // Set under the lock: a session added after this list was taken sees it.
  draining_.store(true, std::memory_order_release);
  return LiveSessions();
}

std::vector<std::shared_ptr<HttpSession>> HttpServerState::BeginStop() {
  {
    absl::MutexLock lock(&gate_mu_);
    open_ = false;
  }
  absl::MutexLock lock(&sessions_mu_);
  stopping_ = true;
  return LiveSessions();
}

std::vector<std::shared_ptr<HttpSession>> HttpServerState::LiveSessions() {
  std::vector<std::shared_ptr<HttpSession>> live;
  for (const auto& [pointer, handle] : sessions_) {
    if (auto session = handle.lock()) live.push_back(std::move(session));
  }
  return live;
}

}  // namespace llmc::gateway
