#include "gateway/http/output_queue.h"

#include <utility>

namespace llmc::gateway {

OutputQueue::OutputQueue(HttpObserver* observer) : observer_(observer) {}

OutputQueue::~OutputQueue() { CountQueued(-static_cast<int64_t>(queued_bytes_)); }

void OutputQueue::Push(std::string bytes, bool ends_response) {
  CountQueued(static_cast<int64_t>(bytes.size()));
  outputs_.push_back(Output{std::move(bytes), ends_response});
}

const std::vector<boost::asio::const_buffer>& OutputQueue::StartWrite() {
  writing_ = true;
  write_buffers_.clear();
  size_t bytes = 0;
  for (const Output& output : outputs_) {
    if (write_buffers_.size() == kMaxBuffersPerWrite ||
        (bytes > 0 && bytes + output.bytes.size() > kMaxBytesPerWrite)) {
      break;
    }
    write_buffers_.push_back(boost::asio::buffer(output.bytes));
    bytes += output.bytes.size();
    if (output.ends_response) break;
  }
  return write_buffers_;
}

bool OutputQueue::FinishWrite() {
  writing_ = false;
  bool ends_response = false;
  for (size_t written = write_buffers_.size(); written > 0; --written) {
    ends_response = outputs_.front().ends_response;
    CountQueued(-static_cast<int64_t>(outputs_.front().bytes.size()));
    outputs_.pop_front();
  }
  write_buffers_.clear();
  if (queued_bytes_ <= kDrainedBytes) RunDrainedCallback();
  return ends_response;
}

void OutputQueue::Clear() {
  writing_ = false;
  write_buffers_.clear();
  outputs_.clear();
  CountQueued(-static_cast<int64_t>(queued_bytes_));
}

void OutputQueue::WhenDrained(std::function<void()> callback) {
  if (queued_bytes_ <= kDrainedBytes) return callback();
  RunDrainedCallback();
  on_drained_ = std::move(callback);
}

void OutputQueue::RunDrainedCallback() {
  std::function<void()> callback = std::move(on_drained_);
  on_drained_ = nullptr;
  if (callback) callback();
}

void OutputQueue::CountQueued(int64_t delta) {
  queued_bytes_ = static_cast<size_t>(static_cast<int64_t>(queued_bytes_) + delta);
  if (delta != 0 && observer_ != nullptr) observer_->OnResponseBytesQueued(delta);
}

}  // namespace llmc::gateway
