#ifndef LLMC_TOOLS_CHAT_CHAT_CLI_H_
#define LLMC_TOOLS_CHAT_CHAT_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace llmc::chat {

// llmc-chat's command line, without the program name: parses the flags, checks the server (GET /v1/models,
// which also checks the API key) and chats, reading `input_fd`, until /exit or the end of input. Returns the
// exit code: 0 when the user left, 1 when the server cannot be used, 2 for bad flags, 130 when Ctrl-C
// interrupted the start-up check of the server.
int ChatMain(const std::vector<std::string>& args, int input_fd, std::ostream& out, std::ostream& err);

}  // namespace llmc::chat

#endif  // LLMC_TOOLS_CHAT_CHAT_CLI_H_
