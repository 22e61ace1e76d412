// The gateway's channels to workers: one per address, dropped when the address leaves the routing table.
#include "gateway/dispatch/worker_channels.h"

#include "tests/support/catch.h"

namespace llmc::gateway {
namespace {

TEST_CASE("worker channels: one per address, and those of workers that left are dropped", "[unit][gateway]") {
  WorkerChannels channels;
  const std::shared_ptr<v1::Worker::Stub> a = channels.Stub("127.0.0.1:1");
  const std::shared_ptr<v1::Worker::Stub> b = channels.Stub("127.0.0.1:2");
  CHECK(channels.Stub("127.0.0.1:1") == a);
  CHECK(channels.size() == 2);

  channels.RetainOnly({"127.0.0.1:1"});
  CHECK(channels.size() == 1);
  CHECK(channels.Stub("127.0.0.1:1") == a);
  CHECK(b.use_count() == 1);                 // a caller that still holds it keeps it alive
  CHECK(channels.Stub("127.0.0.1:2") != b);  // a worker that comes back gets a fresh channel

  channels.RetainOnly({});
  CHECK(channels.size() == 0);
}

}  // namespace
}  // namespace llmc::gateway
