// llmc-chat: a terminal chat with any OpenAI-compatible server, in the spirit of FastChat's CLI.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "tools/chat/chat_cli.h"

int main(int argc, char** argv) {
  return llmc::chat::ChatMain(std::vector<std::string>(argv + 1, argv + argc), STDIN_FILENO, std::cout, std::cerr);
}
