#ifndef LLMC_GATEWAY_WEB_CHAT_PAGE_H_
#define LLMC_GATEWAY_WEB_CHAT_PAGE_H_

#include <string_view>

namespace llmc::gateway {

// The browser chat page served at / (gateway/web/chat_page.html, built into the binary): one static page
// with no external assets that talks to this gateway's /v1 API.
std::string_view ChatPageHtml();

}  // namespace llmc::gateway

#endif  // LLMC_GATEWAY_WEB_CHAT_PAGE_H_
