#ifndef LLMC_COMMON_HOST_PORT_H_
#define LLMC_COMMON_HOST_PORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc {

// A network endpoint "host:port": a DNS name, an IPv4 address, or a bracketed IPv6 address.
struct HostPort {
  std::string host;  // without brackets
  uint16_t port = 0;

  // "host:port", with brackets around IPv6 hosts.
  std::string ToString() const;
};

// Parses and validates "host:port". Port 0 is accepted only when `allow_port_zero` (listen addresses
// that ask the kernel for a free port); addresses other processes dial must name a real port.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, bool allow_port_zero = false);

// True for hosts only this machine reaches: 127.0.0.0/8, ::1 and "localhost". Another name may resolve to
// anything, so it is not loopback.
bool IsLoopbackHost(const std::string& host);

}  // namespace llmc

#endif  // LLMC_COMMON_HOST_PORT_H_
