#include "tests/support/http_get.h"

#include <cstdint>

#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace llmc::testing {

HttpResponse HttpGet(const std::string& host, int port, const std::string& target) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  using tcp = boost::asio::ip::tcp;
  HttpResponse result;
  try {
    boost::asio::io_context io_context;
    beast::tcp_stream stream(io_context);
    stream.expires_after(std::chrono::seconds(5));
    stream.connect(tcp::endpoint(boost::asio::ip::make_address(host), static_cast<uint16_t>(port)));
    http::request<http::empty_body> request(http::verb::get, target, 11);
    request.set(http::field::host, host);
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    result.status = static_cast<int>(response.result_int());
    result.content_type = std::string(response[http::field::content_type]);
    result.body = response.body();
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  } catch (const std::exception&) {
    result.status = 0;
  }
  return result;
}

}  // namespace llmc::testing
