#include "common/host_port.h"

#include "tests/support/catch.h"

namespace llmc {
namespace {

TEST_CASE("host_port: valid addresses parse", "[unit][host_port]") {
  auto v4 = ParseHostPort("10.0.0.5:21002");
  REQUIRE(v4.ok());
  CHECK(v4->host == "10.0.0.5");
  CHECK(v4->port == 21002);
  CHECK(v4->ToString() == "10.0.0.5:21002");

  auto name = ParseHostPort("worker-0.llmc.svc.cluster.local:21002");
  REQUIRE(name.ok());
  CHECK(name->host == "worker-0.llmc.svc.cluster.local");

  auto v6 = ParseHostPort("[::1]:8000");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->ToString() == "[::1]:8000");

  CHECK(ParseHostPort("0.0.0.0:0", /*allow_port_zero=*/true).ok());
}

TEST_CASE("host_port: malformed addresses are INVALID_ARGUMENT", "[unit][host_port]") {
  for (const char* bad :
       {"", "localhost", "localhost:", ":8000", "host:65536", "host:-1", "host:80x", "::1:80", "[::1]", "[::1]80",
        "[zz::1]:80", "bad host:80", "-host:80", "host-:80", "a..b:80", "host:0", "http://host:80"}) {
    INFO(bad);
    auto parsed = ParseHostPort(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace llmc
