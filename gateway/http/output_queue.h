#ifndef LLMC_GATEWAY_HTTP_OUTPUT_QUEUE_H_
#define LLMC_GATEWAY_HTTP_OUTPUT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "boost/asio/buffer.hpp"
#include "gateway/http/http_server_options.h"

namespace llmc::gateway {

// What one connection has queued for its client, in order, and which part of it the next write sends.
//
// One write is in flight at a time. StartWrite() gathers from the front at least one output, and at most
// kMaxBuffersPerWrite outputs and kMaxBytesPerWrite bytes, never past the end of a response, so the end of
// a write tells whether a response has ended. The batch's buffers point into the queue and stay valid
// until FinishWrite() or Clear(), whatever is pushed meanwhile.
//
// Threading: not thread-safe; the session uses it on its strand.
class OutputQueue {
 public:
  static constexpr size_t kMaxBuffersPerWrite = 64;
  static constexpr size_t kMaxBytesPerWrite = 256 * 1024;
  // At most this much queued counts as drained (ResponseWriter::WhenDrained).
  static constexpr size_t kDrainedBytes = 16 * 1024;

  // `observer`, when not null, is told each change of the bytes queued (it sums them over connections).
  explicit OutputQueue(HttpObserver* observer);
  // What is still queued is reported as dropped.
  ~OutputQueue();
  OutputQueue(const OutputQueue&) = delete;
  OutputQueue& operator=(const OutputQueue&) = delete;

  // Queues `bytes` (possibly none) behind what is queued; `ends_response` marks the last of a response.
  void Push(std::string bytes, bool ends_response);

  bool empty() const { return outputs_.empty(); }
  // Bytes pushed and not yet written or dropped, including those of the write in flight.
  size_t queued_bytes() const { return queued_bytes_; }
  bool writing() const { return writing_; }

  // Marks a write in flight and returns the buffers it should send. Requires !empty() and !writing().
  const std::vector<boost::asio::const_buffer>& StartWrite();
  // The write in flight has completed: drops what it sent and, once no more than kDrainedBytes are queued,
  // runs the drained callback. True when the write sent the end of a response.
  bool FinishWrite();
  // Drops everything queued and forgets the write in flight: only once the socket no longer reads from
  // its buffers (its write completed, or none was started).
  void Clear();

  // Runs `callback` now when no more than kDrainedBytes are queued, else once a write brings the queue
  // there. A producer waits for one callback at a time: one already waiting runs now, never stranded.
  void WhenDrained(std::function<void()> callback);
  // Runs the waiting drained callback, if any (the connection closes: the producer learns it from there).
  void RunDrainedCallback();

 private:
  struct Output {
    std::string bytes;
    bool ends_response = false;
  };

  void CountQueued(int64_t delta);

  HttpObserver* const observer_;
  std::deque<Output> outputs_;
  size_t queued_bytes_ = 0;  // in outputs_
  bool writing_ = false;
  // The write in flight: its first write_buffers_.size() entries of outputs_. A deque, so that pushing to
  // its back moves none of them.
  std::vector<boost::asio::const_buffer> write_buffers_;
  std::function<void()> on_drained_;  // the producer waiting for the queue to drain
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_OUTPUT_QUEUE_H_
