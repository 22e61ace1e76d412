// Integration test: llmc-chat on a pseudo-terminal against the real controller, worker and gateway, typed
// at as a user would: multi-line input, streamed replies, history, commands, --debug, Ctrl-C during a
// reply (the request is cancelled on the worker) and server errors.
#include <string>

#include "tests/support/catch.h"
#include "tests/support/controller_process.h"
#include "tests/support/gateway_process.h"
#include "tests/support/metrics_text.h"
#include "tests/support/pty_process.h"
#include "tests/support/small_model.h"
#include "tests/support/wait.h"
#include "tests/support/worker_process.h"

namespace llmc::testing {
namespace {

constexpr absl::Duration kReplyTimeout = absl::Seconds(60);

// Diagnostics for a failed check: what the terminal showed and what the gateway logged.
std::string Transcript(const PtyProcess& chat) { return "terminal:\n" + chat.output(); }

TEST_CASE("llmc-chat: a terminal session with history, commands, --debug, Ctrl-C and server errors",
          "[integration][tools][chat]") {
  const std::string api_key = "sk-chat-cli";
  ControllerProcess controller(LLMC_CONTROLLER_BINARY, {});
  WorkerProcess worker(LLMC_WORKER_BINARY, SmallModelPackage(),
                       SmallWorkerArgs(controller.address(), "chat-worker", {"--max_model_len=4096"}));
  GatewayProcess gateway(LLMC_GATEWAY_BINARY, controller.address(),
                         {"--api_keys=" + api_key, "--routing_refresh_interval=200ms"});
  REQUIRE(gateway.WaitHealthy());
  const std::string url = "--url=http://127.0.0.1:" + std::to_string(gateway.port()) + "/v1";

  {
    INFO("a wrong key is a clear error at start, before any prompt");
    PtyProcess chat(LLMC_CHAT_BINARY, {url, "--api_key=sk-wrong"});
    const std::optional<int> code = chat.WaitForExit(absl::Seconds(30));
    INFO(Transcript(chat));
    CHECK(code == 1);
    CHECK_THAT(chat.output(), Catch::Contains("--api_key"));
  }

  {
    PtyProcess chat(LLMC_CHAT_BINARY,
                    {url, "--api_key=" + api_key, "--system=You are terse.", "--max_tokens=6", "--debug"});
    INFO(Transcript(chat));
    REQUIRE(chat.WaitFor("chatting with llmc-small", kReplyTimeout));
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    // A trailing backslash continues the message; Enter on a terminal sends a carriage return.
    chat.Type("hello there\\\r");
    REQUIRE(chat.WaitFor("... ", kReplyTimeout));
    chat.Type("second line\r");
    REQUIRE(chat.WaitFor("[prompt as the server renders it", kReplyTimeout));
    REQUIRE(chat.WaitFor("[end of prompt]", kReplyTimeout));
    std::string shown = chat.output();
    CHECK_THAT(shown, Catch::Contains("You are terse."));
    CHECK_THAT(shown, Catch::Contains("hello there\r\nsecond line"));  // the terminal shows \n as \r\n
    REQUIRE(chat.WaitFor("ASSISTANT: ", kReplyTimeout));
    REQUIRE(chat.WaitFor("tokens/s", kReplyTimeout));
    CHECK_THAT(chat.SinceMark(), !Catch::Contains("error"));

    // The second turn carries the first one: the rendered prompt holds both user messages.
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("and again\r");
    REQUIRE(chat.WaitFor("[prompt as the server renders it", kReplyTimeout));
    REQUIRE(chat.WaitFor("[end of prompt]", kReplyTimeout));
    shown = chat.output().substr(chat.output().rfind("[prompt as the server renders it"));
    CHECK_THAT(shown, Catch::Contains("second line"));
    CHECK_THAT(shown, Catch::Contains("and again"));
    REQUIRE(chat.WaitFor("tokens/s", kReplyTimeout));

    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("/model no-such-model\r");
    REQUIRE(chat.WaitFor("the server has no model 'no-such-model'", kReplyTimeout));
    CHECK(chat.WaitFor("still using llmc-small", kReplyTimeout));
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type(std::string("/model ") + kSmallModelName + "\r");
    CHECK(chat.WaitFor("switched to it", kReplyTimeout));

    // /clear forgets the conversation but keeps the system prompt.
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("/clear\r");
    REQUIRE(chat.WaitFor("[conversation cleared; the system prompt stays]", kReplyTimeout));
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("fresh start\r");
    REQUIRE(chat.WaitFor("[end of prompt]", kReplyTimeout));
    shown = chat.output().substr(chat.output().rfind("[prompt as the server renders it"));
    CHECK_THAT(shown, Catch::Contains("You are terse."));
    CHECK_THAT(shown, Catch::Contains("fresh start"));
    CHECK_THAT(shown, !Catch::Contains("hello there"));
    REQUIRE(chat.WaitFor("tokens/s", kReplyTimeout));

    // Ctrl-D on an empty line leaves.
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("\x04");
    CHECK(chat.WaitForExit(absl::Seconds(30)) == 0);
  }

  {
    INFO("Ctrl-C during a long reply stops it, the worker frees the request, and the chat goes on");
    PtyProcess chat(LLMC_CHAT_BINARY, {url, "--api_key=" + api_key, "--max_tokens=3000", "--temperature=1",
                                       "--extra_body={\"ignore_eos\": true}"});
    INFO(Transcript(chat));
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("tell me a long story\r");
    REQUIRE(chat.WaitFor("ASSISTANT: ", kReplyTimeout));
    REQUIRE(WaitUntil([&] { return ScrapeMetric(worker.metrics_port(), "llmc:num_requests_running") == 1.0; },
                      absl::Seconds(10)));
    chat.Type("\x03");
    REQUIRE(chat.WaitFor("[interrupted]", absl::Seconds(30)));
    CHECK(WaitUntil([&] { return ScrapeMetric(worker.metrics_port(), "llmc:num_requests_running") == 0.0; },
                    absl::Seconds(10)));
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("/exit\r");
    CHECK(chat.WaitForExit(absl::Seconds(30)) == 0);
  }

  {
    INFO("a request the server refuses prints its error, and the session keeps serving");
    PtyProcess chat(LLMC_CHAT_BINARY, {url, "--api_key=" + api_key, "--extra_body={\"top_p\": 7}"});
    INFO(Transcript(chat));
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("hello\r");
    REQUIRE(chat.WaitFor("error: ", kReplyTimeout));
    CHECK(chat.WaitFor("top_p", absl::Seconds(5)));
    REQUIRE(chat.WaitFor("USER: ", kReplyTimeout));
    chat.Type("/help\r");
    CHECK(chat.WaitFor("/clear", kReplyTimeout));
    chat.Type("/exit\r");
    CHECK(chat.WaitForExit(absl::Seconds(30)) == 0);
  }
}

}  // namespace
}  // namespace llmc::testing
