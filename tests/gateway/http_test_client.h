#ifndef LLMC_TESTS_GATEWAY_HTTP_TEST_CLIENT_H_
#define LLMC_TESTS_GATEWAY_HTTP_TEST_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "boost/asio/io_context.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"

namespace llmc::testing {

using TestResponse = boost::beast::http::response<boost::beast::http::string_body>;

// "METHOD target HTTP/1.1" with Host, the given headers and, when `body` is set, Content-Length.
std::string RawRequest(const std::string& method, const std::string& target,
                       const std::vector<std::pair<std::string, std::string>>& headers = {},
                       std::optional<std::string> body = std::nullopt);

// A blocking HTTP client over one loopback connection, writing raw bytes and reading with Beast's parser.
// Every operation gives up after `timeout`.
class HttpTestClient {
 public:
  explicit HttpTestClient(uint16_t port, absl::Duration timeout = absl::Seconds(5));

  bool connected() const { return connected_; }
  bool Write(const std::string& bytes);
  // One whole response; nullopt when the connection failed, closed or timed out first.
  std::optional<TestResponse> Read();
  std::optional<TestResponse> RoundTrip(const std::string& request);

  // An event stream: StartStream reads the response head; ReadChunks reads until `done` holds for the
  // chunks received so far (each chunk's payload, decoded by Beast) or the message ends.
  bool StartStream();
  const TestResponse& stream_head() const { return stream_parser_->get(); }
  bool ReadChunks(const std::function<bool(const std::vector<std::string>&)>& done);
  bool StreamComplete() const { return stream_parser_ && stream_parser_->is_done(); }
  const std::vector<std::string>& chunks() const { return chunks_; }

  // True when the server closes the connection (EOF or reset) within `timeout`; bytes read first are
  // discarded.
  bool PeerCloses(absl::Duration timeout);
  // Shuts the sending side only, as `nc -N` does after its request; the answer can still be read.
  void CloseSend();
  void Close();

 private:
  template <typename Op>
  boost::system::error_code Run(Op op, absl::Duration timeout);

  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  absl::Duration timeout_;
  bool connected_ = false;

  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> stream_parser_;
  std::vector<std::string> chunks_;
  std::function<void(uint64_t, boost::beast::string_view, boost::system::error_code&)> on_chunk_header_;
  std::function<size_t(uint64_t, boost::beast::string_view, boost::system::error_code&)> on_chunk_body_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_GATEWAY_HTTP_TEST_CLIENT_H_
