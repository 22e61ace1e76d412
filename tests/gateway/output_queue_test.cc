// A connection's output queue: what one write gathers (the buffer and byte limits, never past a response's
// end), the bytes it counts and reports, and when a producer waiting for it to drain is called.
#include "gateway/http/output_queue.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/http/http_server_options.h"
#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

class QueuedBytesObserver : public HttpObserver {
 public:
  void OnResponseBytesQueued(int64_t delta) override { queued += delta; }
  int64_t queued = 0;
};

size_t BytesOf(const std::vector<boost::asio::const_buffer>& buffers) {
  size_t bytes = 0;
  for (const auto& buffer : buffers) bytes += buffer.size();
  return bytes;
}

std::string TextOf(const boost::asio::const_buffer& buffer) {
  return std::string(static_cast<const char*>(buffer.data()), buffer.size());
}

TEST_CASE("output queue: one write gathers at most 64 outputs", "[unit][http]") {
  OutputQueue queue(nullptr);
  for (int i = 0; i < 100; ++i) queue.Push("event", false);

  CHECK(queue.StartWrite().size() == OutputQueue::kMaxBuffersPerWrite);
  CHECK(queue.writing());
  CHECK_FALSE(queue.FinishWrite());
  CHECK_FALSE(queue.writing());
  CHECK(queue.queued_bytes() == 36 * 5);

  CHECK(queue.StartWrite().size() == 36);
  CHECK_FALSE(queue.FinishWrite());
  CHECK(queue.empty());
  CHECK(queue.queued_bytes() == 0);
}

TEST_CASE("output queue: one write gathers at most 256 KiB, but always its first output", "[unit][http]") {
  OutputQueue queue(nullptr);
  const std::string quarter(OutputQueue::kMaxBytesPerWrite / 4, 'q');
  const std::string huge(OutputQueue::kMaxBytesPerWrite * 3, 'h');
  for (int i = 0; i < 5; ++i) queue.Push(quarter, false);
  queue.Push(huge, false);
  queue.Push("tail", false);

  // Exactly the limit fits.
  const auto& first = queue.StartWrite();
  CHECK(first.size() == 4);
  CHECK(BytesOf(first) == OutputQueue::kMaxBytesPerWrite);
  queue.FinishWrite();

  // One more output would pass the limit: it waits for the next write.
  CHECK(queue.StartWrite().size() == 1);
  queue.FinishWrite();

  // An output over the limit on its own goes whole, alone.
  const auto& alone = queue.StartWrite();
  REQUIRE(alone.size() == 1);
  CHECK(alone[0].size() == huge.size());
  queue.FinishWrite();

  CHECK(queue.StartWrite().size() == 1);
  queue.FinishWrite();
  CHECK(queue.empty());
}

TEST_CASE("output queue: a write never gathers past the end of a response, and tells when it sent one",
          "[unit][http]") {
  OutputQueue queue(nullptr);
  queue.Push("head", false);
  queue.Push("body", true);
  queue.Push("next head", false);
  queue.Push("", true);  // an HTTP/1.0 stream ends with no bytes
  queue.Push("third", true);

  const auto& first = queue.StartWrite();
  REQUIRE(first.size() == 2);
  CHECK(TextOf(first[0]) == "head");
  CHECK(TextOf(first[1]) == "body");
  CHECK(queue.FinishWrite());

  CHECK(queue.StartWrite().size() == 2);
  CHECK(queue.FinishWrite());

  const auto& third = queue.StartWrite();
  REQUIRE(third.size() == 1);
  CHECK(TextOf(third[0]) == "third");
  CHECK(queue.FinishWrite());
  CHECK(queue.empty());
}

TEST_CASE("output queue: the write's buffers stay valid while more is pushed", "[unit][http]") {
  OutputQueue queue(nullptr);
  queue.Push("first", false);
  const std::vector<boost::asio::const_buffer> buffers = queue.StartWrite();
  for (int i = 0; i < 10000; ++i) queue.Push(std::string(100, 'x'), false);

  REQUIRE(buffers.size() == 1);
  CHECK(TextOf(buffers[0]) == "first");
  CHECK_FALSE(queue.FinishWrite());
  CHECK(queue.queued_bytes() == 10000 * 100);
}

TEST_CASE("output queue: queued bytes are counted and reported until written, cleared or destroyed", "[unit][http]") {
  QueuedBytesObserver observer;
  {
    OutputQueue queue(&observer);
    queue.Push(std::string(1000, 'a'), false);
    queue.Push(std::string(500, 'b'), true);
    queue.Push(std::string(200, 'c'), false);
    CHECK(queue.queued_bytes() == 1700);
    CHECK(observer.queued == 1700);

    queue.StartWrite();
    CHECK(queue.queued_bytes() == 1700);  // the write in flight still counts
    CHECK(queue.FinishWrite());
    CHECK(queue.queued_bytes() == 200);
    CHECK(observer.queued == 200);

    queue.StartWrite();
    queue.Clear();  // the write failed, or the connection closed
    CHECK_FALSE(queue.writing());
    CHECK(queue.empty());
    CHECK(queue.queued_bytes() == 0);
    CHECK(observer.queued == 0);

    queue.Push(std::string(300, 'd'), false);
    CHECK(observer.queued == 300);
  }
  CHECK(observer.queued == 0);
}

TEST_CASE("output queue: a drained callback runs once no more than 16 KiB are queued", "[unit][http]") {
  OutputQueue queue(nullptr);
  int calls = 0;

  SECTION("at most the threshold queued: at once") {
    queue.Push(std::string(OutputQueue::kDrainedBytes, 'x'), false);
    queue.WhenDrained([&] { ++calls; });
    CHECK(calls == 1);
  }

  SECTION("above it: after the write that brings the queue there") {
    queue.Push(std::string(OutputQueue::kDrainedBytes, 'x'), true);
    queue.Push(std::string(OutputQueue::kDrainedBytes, 'y'), true);
    queue.Push("z", false);
    queue.WhenDrained([&] { ++calls; });
    CHECK(calls == 0);

    queue.StartWrite();
    queue.FinishWrite();  // kDrainedBytes + 1 left
    CHECK(calls == 0);
    queue.StartWrite();
    queue.FinishWrite();  // 1 left
    CHECK(calls == 1);
    queue.StartWrite();
    queue.FinishWrite();
    CHECK(calls == 1);  // once
  }

  SECTION("a second callback runs the first, never stranding it") {
    queue.Push(std::string(OutputQueue::kDrainedBytes + 1, 'x'), false);
    int second = 0;
    queue.WhenDrained([&] { ++calls; });
    queue.WhenDrained([&] { ++second; });
    CHECK(calls == 1);
    CHECK(second == 0);

    queue.RunDrainedCallback();  // as when the connection closes
    CHECK(second == 1);
    queue.RunDrainedCallback();
    CHECK(second == 1);
  }

  SECTION("clearing the queue leaves the callback to be run") {
    queue.Push(std::string(OutputQueue::kDrainedBytes + 1, 'x'), false);
    queue.WhenDrained([&] { ++calls; });
    queue.Clear();
    CHECK(calls == 0);
    queue.RunDrainedCallback();
    CHECK(calls == 1);
  }
}

}  // namespace
}  // namespace llmc::gateway
