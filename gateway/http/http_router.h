#ifndef LLMC_GATEWAY_HTTP_HTTP_ROUTER_H_
#define LLMC_GATEWAY_HTTP_HTTP_ROUTER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gateway/http/http_handler.h"

namespace llmc::gateway {

// The route table and the per-request policies around it (API keys, CORS). Filled before the server
// starts, read-only afterwards, so I/O threads share it without locks.
class HttpRouter {
 public:
  struct Route {
    std::string method;
    std::string path;  // a prefix route's path ends with "*": "/v1/models/*"
    HttpHandler handler;
    bool requires_auth = true;
  };

  enum class Match { kFound, kNotFound, kMethodNotAllowed };
  struct Lookup {
    Match match = Match::kNotFound;
    const Route* route = nullptr;  // set when kFound
    std::string allow;             // the path's methods, "GET, POST" (empty when kNotFound)
    std::string route_path;        // the matched route's path, for metric labels (empty when kNotFound)
  };

  HttpRouter(std::vector<std::string> api_keys, std::vector<std::string> cors_allow_origins);

  // A later route for the same method and path replaces the earlier one. A path ending with "/*" matches
  // every longer path under it ("/v1/models/*": "/v1/models/Qwen/Qwen3-0.6B"); exact paths win.
  void Add(std::string method, std::string path, HttpHandler handler, bool requires_auth);

  // `target` may carry a query string; only the path is matched, exactly or by the longest prefix route.
  Lookup Find(absl::string_view method, absl::string_view target) const;
  bool HasPath(absl::string_view target) const;
  // Whether some route uses `method` (keeps metric labels bounded).
  bool KnowsMethod(absl::string_view method) const;

  bool auth_enabled() const { return !api_keys_.empty(); }
  // True when no keys are configured or `authorization` is "Bearer <key>" for one of them; the keys are
  // compared in constant time.
  bool Authorized(absl::string_view authorization) const;

  bool cors_enabled() const { return !cors_allow_origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request from `origin`, or "" when CORS does not allow it.
  std::string AllowedOrigin(absl::string_view origin) const;

  static absl::string_view PathOf(absl::string_view target);
  // What a prefix route matched: "Qwen/Qwen3-0.6B" for "/v1/models/*" and "/v1/models/Qwen/Qwen3-0.6B",
  // percent-decoded.
  static std::string Remainder(absl::string_view route_path, absl::string_view target);

 private:
  std::vector<std::string> api_keys_;
  std::vector<std::string> cors_allow_origins_;
  std::map<std::string, std::map<std::string, Route, std::less<>>, std::less<>> routes_;  // path → method → route
};

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_HTTP_HTTP_ROUTER_H_
