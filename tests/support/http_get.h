#ifndef LLMC_TESTS_SUPPORT_HTTP_GET_H_
#define LLMC_TESTS_SUPPORT_HTTP_GET_H_

#include <string>

namespace llmc::testing {

struct HttpResponse {
  int status = 0;  // 0 when the request failed
  std::string content_type;
  std::string body;
};

// A blocking HTTP/1.1 GET to a loopback server, with a 5 s timeout.
HttpResponse HttpGet(const std::string& host, int port, const std::string& target);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_HTTP_GET_H_
