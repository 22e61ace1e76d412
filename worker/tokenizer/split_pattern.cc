#include "worker/tokenizer/split_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace llmc::tokenizer {
namespace {

// Unicode White_Space, spelled for inside a character class.
constexpr absl::string_view kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// Per-thread PCRE2 scratch: match data and a JIT stack large enough for long whitespace runs.
struct MatchScratch {
  pcre2_match_data* match_data = pcre2_match_data_create(8, nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(match_data);
  }
};

MatchScratch& ThreadScratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

}  // namespace

struct SplitPattern::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

std::string RewriteWhitespaceClasses(absl::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        absl::StrAppend(&out, in_class ? kWhiteSpace : absl::StrCat("[", kWhiteSpace, "]"));
      } else if (next == 'S' && !in_class) {
        absl::StrAppend(&out, "[^", kWhiteSpace, "]");
      } else {
        out.push_back(c);
        out.push_back(next);
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
    } else if (c == ']' && in_class) {
      in_class = false;
    }
    out.push_back(c);
  }
  return out;
}

SplitPattern::SplitPattern(std::unique_ptr<Compiled> compiled, SplitBehavior behavior)
    : compiled_(std::move(compiled)), behavior_(behavior) {}
SplitPattern::~SplitPattern() = default;

absl::StatusOr<std::unique_ptr<SplitPattern>> SplitPattern::Compile(absl::string_view pattern, SplitBehavior behavior) {
  const std::string rewritten = RewriteWhitespaceClasses(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  auto compiled = std::make_unique<Compiled>();
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error_code, &error_offset, nullptr);
  if (compiled->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex does not compile at offset ", error_offset,
                                                   ": ", reinterpret_cast<const char*>(message)));
  }
  // JIT is an optimisation: without it (an unsupported CPU), matching still works, only slower.
  pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
  return std::unique_ptr<SplitPattern>(new SplitPattern(std::move(compiled), behavior));
}

void SplitPattern::Split(absl::string_view text, std::vector<absl::string_view>& pieces) const {
  MatchScratch& scratch = ThreadScratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  size_t emitted = 0;
  while (offset < text.size()) {
    // The caller has validated the UTF-8, so PCRE2 need not check it again on every call.
    const int rc = pcre2_match(compiled_->code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, scratch.match_data,
                               scratch.context);
    if (rc < 0) break;  // no further match (or a resource limit): the rest is one piece
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.match_data);
    const size_t start = ovector[0], end = ovector[1];
    if (end > start) {
      switch (behavior_) {
        case SplitBehavior::kIsolated:
          if (start > emitted) pieces.push_back(text.substr(emitted, start - emitted));
          pieces.push_back(text.substr(start, end - start));
          emitted = end;
          break;
        case SplitBehavior::kMergedWithPrevious:
          pieces.push_back(text.substr(emitted, end - emitted));
          emitted = end;
          break;
        case SplitBehavior::kMergedWithNext:
          if (start > emitted) pieces.push_back(text.substr(emitted, start - emitted));
          emitted = start;
          break;
        case SplitBehavior::kRemoved:
          if (start > emitted) pieces.push_back(text.substr(emitted, start - emitted));
          emitted = end;
          break;
      }
      offset = end;
    } else {
      // An empty match: step over one character so the loop advances.
      offset = start + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
    }
  }
  if (emitted < text.size()) pieces.push_back(text.substr(emitted));
}

}  // namespace llmc::tokenizer
