#ifndef LLMC_COMMON_UTF8_H_
#define LLMC_COMMON_UTF8_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace llmc {

// How the bytes at one position of a UTF-8 string read.
struct Utf8Sequence {
  enum class Kind {
    kValid,       // `length` bytes form one well-formed character
    kInvalid,     // `length` bytes are one maximal ill-formed subpart (replaced by one U+FFFD)
    kIncomplete,  // the data ends inside a character that is well-formed so far (`length` bytes of it)
  };
  Kind kind;
  size_t length;
};

// Reads the sequence starting at `data[position]` (position < data.size()), following the Unicode
// "maximal subpart" practice that Rust's from_utf8_lossy, Python's errors="replace" and WHATWG use.
Utf8Sequence ReadUtf8Sequence(absl::string_view data, size_t position);

// The offset of the first byte that is not well-formed UTF-8, or nullopt when all of `text` is.
std::optional<size_t> FindInvalidUtf8(absl::string_view text);

// `data` with each ill-formed subpart, and an incomplete character at the end, replaced by U+FFFD.
std::string ReplaceInvalidUtf8(absl::string_view data);

}  // namespace llmc

#endif  // LLMC_COMMON_UTF8_H_
