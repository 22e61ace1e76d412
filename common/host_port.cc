#include "common/host_port.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace llmc {
namespace {

// RFC 1123 host names: dot-separated labels of letters, digits and inner hyphens, 253 characters at most.
bool IsValidHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  size_t label_length = 0;
  char previous = '.';
  for (char c : host) {
    if (c == '.') {
      if (label_length == 0 || previous == '-') return false;
      label_length = 0;
    } else if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      if (label_length == 0 && c == '-') return false;
      if (++label_length > 63) return false;
    } else {
      return false;
    }
    previous = c;
  }
  return previous != '-';
}

bool IsValidIpv6(const std::string& host) {
  in6_addr address;
  return inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

absl::Status Malformed(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed address '", text, "': ", why,
                                                 " (expected host:port, e.g. 10.0.0.5:21002 or [::1]:21002)"));
}

}  // namespace

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, bool allow_port_zero) {
  HostPort result;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return Malformed(text, "unclosed '['");
    result.host = std::string(text.substr(1, close - 1));
    if (!IsValidIpv6(result.host)) return Malformed(text, "not an IPv6 address inside brackets");
    if (close + 1 >= text.size() || text[close + 1] != ':') return Malformed(text, "missing ':port'");
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return Malformed(text, "missing ':port'");
    result.host = std::string(text.substr(0, colon));
    if (result.host.find(':') != std::string::npos) return Malformed(text, "IPv6 hosts need brackets");
    if (!IsValidHostName(result.host)) return Malformed(text, "invalid host");
    port_text = text.substr(colon + 1);
  }
  uint32_t port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port > 65535 ||
      !absl::c_all_of(port_text, [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
    return Malformed(text, "port must be a number from 1 to 65535");
  }
  if (port == 0 && !allow_port_zero) return Malformed(text, "port 0 cannot be dialled");
  result.port = static_cast<uint16_t>(port);
  return result;
}

bool IsLoopbackHost(const std::string& host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    static const in6_addr kLoopback = IN6ADDR_LOOPBACK_INIT;
    return std::equal(std::begin(v6.s6_addr), std::end(v6.s6_addr), std::begin(kLoopback.s6_addr));
  }
  return false;
}

}  // namespace llmc
