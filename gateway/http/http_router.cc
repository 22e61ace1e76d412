#include "gateway/http/http_router.h"

#include <algorithm>
#include <utility>

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
  const auto path = routes_.find(PathOf(target));
  if (path == routes_.end()) return lookup;
  std::vector<absl::string_view> methods;
  for (const auto& [name, route] : path->second) {
    methods.push_back(name);
    if (name == method) lookup.route = &route;
  }
  lookup.allow = absl::StrJoin(methods, ", ");
  lookup.match = lookup.route != nullptr ? Match::kFound : Match::kMethodNotAllowed;
  return lookup;
}

bool HttpRouter::HasPath(absl::string_view target) const { return routes_.find(PathOf(target)) != routes_.end(); }

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
