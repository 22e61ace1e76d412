#include "gateway/http/http_router.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace llmc::gateway {
namespace {

// Touches every byte of the longer input whatever the contents, so timing does not tell how much matched.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  const size_t length = std::max(a.size(), b.size());
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < length; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= x ^ y;
  }
  return difference == 0;
}

}  // namespace

HttpRouter::HttpRouter(std::vector<std::string> api_keys, std::vector<std::string> cors_allow_origins)
    : api_keys_(std::move(api_keys)), cors_allow_origins_(std::move(cors_allow_origins)) {}

void HttpRouter::Add(std::string method, std::string path, HttpHandler handler, bool requires_auth) {
  Route route{method, path, std::move(handler), requires_auth};
  routes_[std::move(path)][std::move(method)] = std::move(route);
}

absl::string_view HttpRouter::PathOf(absl::string_view target) {
  const size_t query = target.find_first_of("?#");
  return query == absl::string_view::npos ? target : target.substr(0, query);
}

HttpRouter::Lookup HttpRouter::Find(absl::string_view method, absl::string_view target) const {
  Lookup lookup;
  const absl::string_view wanted = PathOf(target);
  auto path = routes_.find(wanted);
  if (path == routes_.end()) {
    size_t longest = 0;
    for (auto it = routes_.begin(); it != routes_.end(); ++it) {
      const absl::string_view route_path = it->first;
      if (!absl::EndsWith(route_path, "/*")) continue;
      const absl::string_view prefix = route_path.substr(0, route_path.size() - 1);
      if (wanted.size() > prefix.size() && absl::StartsWith(wanted, prefix) && prefix.size() > longest) {
        longest = prefix.size();
        path = it;
      }
    }
  }
  if (path == routes_.end()) return lookup;
  lookup.route_path = path->first;
  std::vector<absl::string_view> methods;
  for (const auto& [name, route] : path->second) {
    methods.push_back(name);
    if (name == method) lookup.route = &route;
  }
  lookup.allow = absl::StrJoin(methods, ", ");
  lookup.match = lookup.route != nullptr ? Match::kFound : Match::kMethodNotAllowed;
  return lookup;
}

bool HttpRouter::HasPath(absl::string_view target) const { return Find("", target).match != Match::kNotFound; }

std::string HttpRouter::Remainder(absl::string_view route_path, absl::string_view target) {
  const absl::string_view path = PathOf(target);
  const size_t prefix = route_path.size() - 1;  // without the "*"
  const absl::string_view rest = path.size() > prefix ? path.substr(prefix) : absl::string_view();
  const auto hex = [](char c) { return absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10; };
  std::string decoded;
  decoded.reserve(rest.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && absl::ascii_isxdigit(rest[i + 1]) &&
        absl::ascii_isxdigit(rest[i + 2])) {
      decoded.push_back(static_cast<char>(hex(rest[i + 1]) * 16 + hex(rest[i + 2])));
      i += 2;
    } else {
      decoded.push_back(rest[i]);
    }
  }
  return decoded;
}

bool HttpRouter::KnowsMethod(absl::string_view method) const {
  for (const auto& [path, methods] : routes_) {
    if (methods.find(method) != methods.end()) return true;
  }
  return method == "OPTIONS";
}

bool HttpRouter::Authorized(absl::string_view authorization) const {
  if (api_keys_.empty()) return true;
  absl::string_view presented = absl::StripAsciiWhitespace(authorization);
  constexpr absl::string_view kScheme = "bearer ";
  if (!absl::StartsWithIgnoreCase(presented, kScheme)) return false;
  presented = absl::StripLeadingAsciiWhitespace(presented.substr(kScheme.size()));
  bool match = false;
  for (const auto& key : api_keys_) match |= ConstantTimeEquals(presented, key);
  return match;
}

std::string HttpRouter::AllowedOrigin(absl::string_view origin) const {
  if (origin.empty()) return "";
  for (const auto& allowed : cors_allow_origins_) {
    if (allowed == "*") return "*";
    if (allowed == origin) return std::string(origin);
  }
  return "";
}

}  // namespace llmc::gateway
