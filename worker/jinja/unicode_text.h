#ifndef LLMC_WORKER_JINJA_UNICODE_TEXT_H_
#define LLMC_WORKER_JINJA_UNICODE_TEXT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

// Python treats strings as sequences of code points; these helpers give UTF-8 strings the same view.
// Strings reaching the interpreter are valid UTF-8 (checked where they enter), so decoding is lenient:
// a stray byte reads as one code point of its own value and never fails.
namespace llmc::jinja {

bool IsValidUtf8(absl::string_view text);

// Decodes the code point at `*position` and advances past it.
char32_t DecodeCodePoint(absl::string_view text, size_t* position);
void AppendCodePoint(char32_t code_point, std::string* out);
std::vector<char32_t> DecodeAll(absl::string_view text);
std::string EncodeAll(const std::vector<char32_t>& code_points);
size_t CodePointCount(absl::string_view text);

// Python's str.isspace (which `\s`, strip() and split() use).
bool IsPythonSpace(char32_t c);
// Python's str.isprintable, approximated: the control, format, separator and private-use ranges that
// chat text can plausibly hold are not printable.
bool IsPythonPrintable(char32_t c);
// Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other code points are caseless.
char32_t ToUpperCase(char32_t c);
char32_t ToLowerCase(char32_t c);
bool IsCased(char32_t c);
bool IsAlphaNumeric(char32_t c);

std::string Upper(absl::string_view text);
std::string Lower(absl::string_view text);

// str.strip/lstrip/rstrip: with `chars` null, whitespace; otherwise the code points in *chars.
std::string Strip(absl::string_view text, const std::string* chars, bool left, bool right);

// str.splitlines(): splits at \n, \r\n, \r and Python's other line boundaries, dropping them.
std::vector<std::string> SplitLines(absl::string_view text);

}  // namespace llmc::jinja

#endif  // LLMC_WORKER_JINJA_UNICODE_TEXT_H_
