#include "tools/bench/load_runner.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "tools/bench/sse_parser.h"

namespace llmc::bench {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBodyBytes = 64 << 10;
constexpr uint32_t kMaxHeaderBytes = 64 << 10;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(d));
}

using Transcript = std::vector<std::pair<std::string, std::string>>;

http::request<http::string_body> MakeRequest(const RunnerOptions& options, const BenchPrompt& prompt,
                                             const Transcript& history) {
  http::request<http::string_body> request{http::verb::post, options.path, 11};
  request.set(http::field::host, options.url.HostHeader());
  request.set(http::field::user_agent, "llmc-bench");
  request.set(http::field::content_type, "application/json");
  request.set(http::field::accept, "text/event-stream");
  if (!options.api_key.empty()) request.set(http::field::authorization, "Bearer " + options.api_key);
  request.keep_alive(true);
  CompletionRequest body;
  body.model = options.model;
  body.prompt = prompt.prompt;
  body.history = history;
  body.max_tokens = prompt.output_len;
  body.chat = options.chat;
  body.ignore_eos = options.ignore_eos;
  body.temperature = options.temperature;
  request.body() = BuildRequestBody(body);
  request.prepare_payload();
  return request;
}

class LoadSession;

// One request, from taking a connection to the end of its response. Runs on the session's one thread.
class RequestOp : public std::enable_shared_from_this<RequestOp> {
 public:
  RequestOp(LoadSession& session, size_t index, http::request<http::string_body> request, int64_t input_estimate,
            int64_t output_len, bool keep_text);

  void Start(std::unique_ptr<beast::tcp_stream> pooled);
  // Closes the connection; the pending operation then fails and the request ends as failed with `why`.
  void Abort(const std::string& why);

 private:
  void Connect();
  void Write();
  void OnWrite(beast::error_code ec);
  void OnHeader(beast::error_code ec);
  void ReadSome();
  void OnRead(beast::error_code ec);
  void HandleEvent(const std::string& data, Clock::time_point now);
  // A failure on a reused keep-alive connection before any response: the server may have closed it.
  bool RetryOnFreshConnection(beast::error_code ec);
  void Fail(const std::string& kind, const std::string& message);
  void FailIo(const std::string& stage, beast::error_code ec);
  void Finish();
  void Complete();

  LoadSession& session_;
  const size_t index_;
  http::request<http::string_body> request_;
  std::unique_ptr<beast::tcp_stream> stream_;
  bool reused_ = false;
  bool retried_ = false;
  bool ended_ = false;
  std::string abort_reason_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  char body_chunk_[16 << 10];
  SseParser sse_;
  std::vector<std::string> events_;
  std::string error_body_;
  std::string stream_error_;
  Clock::time_point start_;
  Clock::time_point deadline_;
  Clock::time_point last_token_;
  bool first_token_seen_ = false;
  const bool keep_text_;
  RequestResult result_;
};

class LoadSession {
 public:
  LoadSession(const RunnerOptions& options, const std::vector<BenchPrompt>& prompts,
              const std::vector<double>& arrivals_s, std::function<void(const RunProgress&)> on_progress,
              tcp::resolver::results_type endpoints)
      : options_(options),
        prompts_(prompts),
        arrivals_s_(arrivals_s),
        on_progress_(std::move(on_progress)),
        endpoints_(std::move(endpoints)),
        arrival_timer_(io_),
        progress_timer_(io_),
        stop_timer_(io_) {
    results_.resize(prompts.size());
    queued_.assign(prompts.size(), false);
    for (const BenchPrompt& prompt : prompts) {
      if (prompt.conversation < 0) continue;
      if (transcripts_.size() <= static_cast<size_t>(prompt.conversation)) {
        transcripts_.resize(static_cast<size_t>(prompt.conversation) + 1);
      }
    }
    if (!options.system_prompt.empty()) {
      for (Transcript& transcript : transcripts_) transcript.emplace_back("system", options.system_prompt);
    }
  }

  RunOutput Run() {
    start_ = Clock::now();
    end_ = start_;
    if (prompts_.empty()) return Output();
    stop_timer_.expires_at(start_ + ToChrono(options_.max_duration));
    stop_timer_.async_wait([this](beast::error_code ec) {
      if (!ec) StopAll();
    });
    ScheduleProgress();
    OnArrivals();
    io_.run();
    idle_.clear();
    Report();
    return Output();
  }

  net::io_context& io() { return io_; }
  const tcp::resolver::results_type& endpoints() const { return endpoints_; }
  Clock::duration request_timeout() const { return ToChrono(options_.request_timeout); }
  Clock::time_point start() const { return start_; }
  bool chat() const { return options_.chat; }

  void ReturnConnection(std::unique_ptr<beast::tcp_stream> stream) {
    if (!stopping_) idle_.push_back(std::move(stream));
  }

  void OnRequestDone(size_t index, RequestResult result) {
    if (!stopping_) ContinueConversation(index, result);
    active_.erase(index);
    --in_flight_;
    ++done_;
    if (result.success) {
      ++completed_;
      output_tokens_ += result.output_tokens;
    } else {
      ++failed_;
    }
    results_[index] = std::move(result);
    end_ = Clock::now();
    if (done_ == prompts_.size()) {
      Shutdown();
      return;
    }
    Pump();
  }

 private:
  RunOutput Output() {
    RunOutput output;
    output.results = std::move(results_);
    output.duration_s = Seconds(end_ - start_);
    output.hit_max_duration = hit_max_duration_;
    return output;
  }

  void Queue(size_t index) {
    queued_[index] = true;
    ready_.push_back(index);
  }

  // A conversation's next turn goes once this one has its answer, with the answer in its history.
  void ContinueConversation(size_t index, const RequestResult& result) {
    const BenchPrompt& prompt = prompts_[index];
    if (prompt.conversation < 0) return;
    if (result.success) {
      Transcript& transcript = transcripts_[static_cast<size_t>(prompt.conversation)];
      transcript.emplace_back("user", prompt.prompt);
      transcript.emplace_back("assistant", result.generated_text);
    }
    const size_t next = index + 1;
    if (next < prompts_.size() && prompts_[next].conversation == prompt.conversation && !queued_[next]) Queue(next);
  }

  void OnArrivals() {
    const Clock::time_point now = Clock::now();
    while (next_arrival_ < prompts_.size() && start_ + std::chrono::duration_cast<Clock::duration>(
                                                           std::chrono::duration<double>(arrivals_s_[next_arrival_])) <=
                                                  now) {
      // A later turn of a conversation is queued by the turn before it.
      const size_t index = next_arrival_++;
      if (prompts_[index].turn == 0) Queue(index);
    }
    Pump();
    if (next_arrival_ < prompts_.size() && !stopping_) {
      arrival_timer_.expires_at(start_ + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(arrivals_s_[next_arrival_])));
      arrival_timer_.async_wait([this](beast::error_code ec) {
        if (!ec) OnArrivals();
      });
    }
  }

  void Pump() {
    while (!ready_.empty() && !stopping_ &&
           (options_.max_concurrency <= 0 || in_flight_ < static_cast<size_t>(options_.max_concurrency))) {
      const size_t index = ready_.front();
      ready_.pop_front();
      const BenchPrompt& prompt = prompts_[index];
      static const Transcript kNoHistory;
      const Transcript& history =
          prompt.conversation < 0 ? kNoHistory : transcripts_[static_cast<size_t>(prompt.conversation)];
      auto op = std::make_shared<RequestOp>(*this, index, MakeRequest(options_, prompt, history), prompt.input_len,
                                            prompt.output_len, /*keep_text=*/prompt.conversation >= 0);
      active_[index] = op;
      ++in_flight_;
      std::unique_ptr<beast::tcp_stream> pooled;
      if (!idle_.empty()) {
        pooled = std::move(idle_.back());
        idle_.pop_back();
      }
      op->Start(std::move(pooled));
    }
  }

  void StopAll() {
    if (stopping_) return;
    stopping_ = true;
    hit_max_duration_ = true;
    const std::string why =
        absl::StrCat("the run reached --max_duration (", absl::FormatDuration(options_.max_duration), ")");
    // Requests not sent yet (later turns included) fail at once; running ones when their aborted operation
    // returns.
    next_arrival_ = prompts_.size();
    for (size_t index = 0; index < prompts_.size(); ++index) {
      if (!queued_[index]) Queue(index);
    }
    for (size_t index : ready_) {
      RequestResult result;
      result.error_kind = "not sent";
      result.error = why;
      result.prompt_tokens = prompts_[index].input_len;
      result.expected_output = prompts_[index].output_len;
      ++in_flight_;  // balanced by OnRequestDone
      OnRequestDone(index, std::move(result));
      if (done_ == prompts_.size()) return;
    }
    ready_.clear();
    std::vector<std::shared_ptr<RequestOp>> running;
    for (auto& [index, op] : active_) running.push_back(op);
    for (auto& op : running) op->Abort(why);
  }

  void Shutdown() {
    stopping_ = true;
    arrival_timer_.cancel();
    progress_timer_.cancel();
    stop_timer_.cancel();
    idle_.clear();
  }

  void ScheduleProgress() {
    if (!on_progress_) return;
    progress_timer_.expires_after(std::chrono::milliseconds(250));
    progress_timer_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      Report();
      ScheduleProgress();
    });
  }

  void Report() {
    if (!on_progress_) return;
    RunProgress progress;
    progress.total = static_cast<int64_t>(prompts_.size());
    progress.completed = completed_;
    progress.failed = failed_;
    progress.in_flight = static_cast<int64_t>(in_flight_);
    progress.output_tokens = output_tokens_;
    progress.elapsed_s = Seconds((done_ == prompts_.size() ? end_ : Clock::now()) - start_);
    on_progress_(progress);
  }

  const RunnerOptions& options_;
  const std::vector<BenchPrompt>& prompts_;
  const std::vector<double>& arrivals_s_;
  std::function<void(const RunProgress&)> on_progress_;
  net::io_context io_;
  tcp::resolver::results_type endpoints_;
  net::steady_timer arrival_timer_;
  net::steady_timer progress_timer_;
  net::steady_timer stop_timer_;
  Clock::time_point start_;
  Clock::time_point end_;
  size_t next_arrival_ = 0;
  std::vector<bool> queued_;             // per prompt: put in ready_ once, by its arrival or by its conversation
  std::vector<Transcript> transcripts_;  // per conversation: the messages so far
  std::deque<size_t> ready_;
  std::map<size_t, std::shared_ptr<RequestOp>> active_;
  std::vector<std::unique_ptr<beast::tcp_stream>> idle_;
  std::vector<RequestResult> results_;
  size_t in_flight_ = 0;
  size_t done_ = 0;
  int64_t completed_ = 0;
  int64_t failed_ = 0;
  int64_t output_tokens_ = 0;
  bool stopping_ = false;
  bool hit_max_duration_ = false;
};

RequestOp::RequestOp(LoadSession& session, size_t index, http::request<http::string_body> request,
                     int64_t input_estimate, int64_t output_len, bool keep_text)
    : session_(session), index_(index), request_(std::move(request)), keep_text_(keep_text) {
  result_.prompt_tokens = input_estimate;
  result_.expected_output = output_len;
}

void RequestOp::Start(std::unique_ptr<beast::tcp_stream> pooled) {
  start_ = Clock::now();
  deadline_ = start_ + session_.request_timeout();
  result_.start_s = Seconds(start_ - session_.start());
  if (pooled) {
    stream_ = std::move(pooled);
    reused_ = true;
    Write();
  } else {
    Connect();
  }
}

void RequestOp::Abort(const std::string& why) {
  if (ended_ || !abort_reason_.empty()) return;
  abort_reason_ = why;
  if (stream_) {
    beast::error_code ignored;
    stream_->socket().close(ignored);
  }
}

void RequestOp::Connect() {
  stream_ = std::make_unique<beast::tcp_stream>(session_.io());
  stream_->expires_at(deadline_);
  stream_->async_connect(session_.endpoints(), [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
    if (ec) return self->FailIo("connect", ec);
    self->Write();
  });
}

void RequestOp::Write() {
  stream_->expires_at(deadline_);
  http::async_write(*stream_, request_,
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void RequestOp::OnWrite(beast::error_code ec) {
  if (ec) {
    if (RetryOnFreshConnection(ec)) return;
    return FailIo("write", ec);
  }
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  stream_->expires_at(deadline_);
  http::async_read_header(*stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

bool RequestOp::RetryOnFreshConnection(beast::error_code ec) {
  if (!reused_ || retried_ || !abort_reason_.empty() || ec == beast::error::timeout) return false;
  retried_ = true;
  reused_ = false;
  buffer_.clear();
  parser_.reset();
  beast::error_code ignored;
  stream_->socket().close(ignored);
  Connect();
  return true;
}

void RequestOp::OnHeader(beast::error_code ec) {
  if (ec) {
    if (RetryOnFreshConnection(ec)) return;
    return FailIo("read", ec);
  }
  result_.http_status = static_cast<int>(parser_->get().result_int());
  if (parser_->is_done()) return Finish();
  ReadSome();
}

void RequestOp::ReadSome() {
  parser_->get().body().data = body_chunk_;
  parser_->get().body().size = sizeof(body_chunk_);
  stream_->expires_at(deadline_);
  http::async_read_some(*stream_, buffer_, *parser_,
                        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
}

void RequestOp::OnRead(beast::error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) return FailIo("read", ec);
  const Clock::time_point now = Clock::now();
  const size_t received = sizeof(body_chunk_) - parser_->get().body().size;
  const absl::string_view bytes(body_chunk_, received);
  if (result_.http_status == 200) {
    events_.clear();
    if (!sse_.Feed(bytes, events_)) return Fail("malformed stream", "a line of the event stream is too long");
    for (const std::string& event : events_) HandleEvent(event, now);
  } else if (error_body_.size() < kMaxErrorBodyBytes) {
    absl::StrAppend(&error_body_, bytes.substr(0, kMaxErrorBodyBytes - error_body_.size()));
  }
  if (parser_->is_done()) return Finish();
  ReadSome();
}

void RequestOp::HandleEvent(const std::string& data, Clock::time_point now) {
  const StreamChunk chunk = InterpretChunk(data, session_.chat());
  switch (chunk.kind) {
    case StreamChunk::Kind::kDone:
      return;
    case StreamChunk::Kind::kError:
    case StreamChunk::Kind::kMalformed:
      if (stream_error_.empty()) stream_error_ = chunk.error;
      return;
    case StreamChunk::Kind::kData:
      break;
  }
  if (!chunk.text.empty()) {
    ++result_.content_chunks;
    result_.generated_chars += static_cast<int64_t>(chunk.text.size());
    if (keep_text_) result_.generated_text += chunk.text;
    if (!first_token_seen_) {
      first_token_seen_ = true;
      result_.ttft_s = Seconds(now - start_);
    } else {
      result_.itl_s.push_back(Seconds(now - last_token_));
    }
    last_token_ = now;
  }
  if (chunk.completion_tokens) {
    result_.output_tokens = *chunk.completion_tokens;
    result_.usage_reported = true;
  }
  if (chunk.prompt_tokens) result_.prompt_tokens = *chunk.prompt_tokens;
  if (chunk.cached_tokens) result_.cached_tokens = *chunk.cached_tokens;
}

void RequestOp::FailIo(const std::string& stage, beast::error_code ec) {
  if (!abort_reason_.empty()) return Fail("max duration", abort_reason_);
  if (ec == beast::error::timeout) {
    return Fail("timeout", absl::StrCat("no complete response within --timeout (", stage, ")"));
  }
  if (stage == "connect") return Fail("connect", absl::StrCat("connect: ", ec.message()));
  return Fail("connection", absl::StrCat(stage, ": ", ec.message()));
}

void RequestOp::Fail(const std::string& kind, const std::string& message) {
  if (ended_) return;
  result_.success = false;
  result_.error_kind = kind;
  result_.error = message;
  if (stream_) {
    beast::error_code ignored;
    stream_->socket().close(ignored);
    stream_.reset();
  }
  Complete();
}

void RequestOp::Finish() {
  if (ended_) return;
  // A complete response leaves the connection usable, whatever its status.
  if (parser_->keep_alive()) {
    session_.ReturnConnection(std::move(stream_));
  } else {
    beast::error_code ignored;
    stream_->socket().close(ignored);
  }
  stream_.reset();
  if (result_.http_status != 200) {
    return Fail(absl::StrCat("HTTP ", result_.http_status),
                absl::StrCat("HTTP ", result_.http_status, ": ", ErrorMessageFromBody(error_body_)));
  }
  if (!stream_error_.empty()) return Fail("stream error", stream_error_);
  if (result_.content_chunks == 0) return Fail("no output", "the stream carried no generated text");
  result_.success = true;
  if (!result_.usage_reported) result_.output_tokens = result_.content_chunks;
  Complete();
}

void RequestOp::Complete() {
  ended_ = true;
  result_.latency_s = Seconds(Clock::now() - start_);
  session_.OnRequestDone(index_, std::move(result_));
}

}  // namespace

absl::StatusOr<RunOutput> RunLoad(const RunnerOptions& options, const std::vector<BenchPrompt>& prompts,
                                  const std::vector<double>& arrivals_s,
                                  const std::function<void(const RunProgress&)>& on_progress) {
  if (arrivals_s.size() != prompts.size()) {
    return absl::InvalidArgumentError("RunLoad: one arrival time per prompt is needed");
  }
  net::io_context resolve_io;
  tcp::resolver resolver(resolve_io);
  beast::error_code ec;
  auto endpoints = resolver.resolve(options.url.host, options.url.port, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", options.url.host, ":", options.url.port, ": ", ec.message()));
  }
  LoadSession session(options, prompts, arrivals_s, on_progress, std::move(endpoints));
  return session.Run();
}

absl::StatusOr<HttpAnswer> HttpGet(const ServerUrl& url, const std::string& path, const std::string& api_key,
                                   absl::Duration timeout) {
  net::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  const auto deadline = Clock::now() + ToChrono(timeout);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot resolve ", url.host, ": ", ec.message()));
  http::request<http::empty_body> request{http::verb::get, path, 11};
  request.set(http::field::host, url.HostHeader());
  request.set(http::field::user_agent, "llmc-bench");
  if (!api_key.empty()) request.set(http::field::authorization, "Bearer " + api_key);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(8 << 20);
  // Asynchronous operations run to completion here, so the stream's deadline bounds each step.
  std::string failure;
  stream.expires_at(deadline);
  stream.async_connect(endpoints, [&](beast::error_code connect_ec, const tcp::endpoint&) {
    if (connect_ec) {
      failure = absl::StrCat("connect: ", connect_ec.message());
      return;
    }
    stream.expires_at(deadline);
    http::async_write(stream, request, [&](beast::error_code write_ec, size_t) {
      if (write_ec) {
        failure = absl::StrCat("write: ", write_ec.message());
        return;
      }
      stream.expires_at(deadline);
      http::async_read(stream, buffer, parser, [&](beast::error_code read_ec, size_t) {
        if (read_ec) failure = absl::StrCat("read: ", read_ec.message());
      });
    });
  });
  io.run();
  if (!failure.empty()) {
    return absl::UnavailableError(absl::StrCat("GET http://", url.HostHeader(), path, ": ", failure));
  }
  return HttpAnswer{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

}  // namespace llmc::bench
