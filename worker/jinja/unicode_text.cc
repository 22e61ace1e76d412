#include "worker/jinja/unicode_text.h"

#include <algorithm>

namespace llmc::jinja {
namespace {

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Latin Extended-A pairs upper and lower case at even/odd code points, with a few exceptions.
bool InLatinExtendedAPairs(char32_t c) { return (c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177); }
bool InLatinExtendedAShiftedPairs(char32_t c) { return (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E); }

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    size_t length;
    char32_t minimum;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      minimum = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      minimum = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      minimum = 0x10000;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    char32_t c = lead & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
      const unsigned char byte = static_cast<unsigned char>(text[i + k]);
      if (!IsContinuation(byte)) return false;
      c = (c << 6) | (byte & 0x3F);
    }
    if (c < minimum || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

char32_t DecodeCodePoint(absl::string_view text, size_t* position) {
  const unsigned char lead = static_cast<unsigned char>(text[*position]);
  size_t length = 1;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
  }
  if (length == 1 || *position + length > text.size()) {
    ++*position;
    return lead;
  }
  char32_t c = lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    const unsigned char byte = static_cast<unsigned char>(text[*position + k]);
    if (!IsContinuation(byte)) {
      ++*position;
      return lead;
    }
    c = (c << 6) | (byte & 0x3F);
  }
  *position += length;
  return c;
}

void AppendCodePoint(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::vector<char32_t> DecodeAll(absl::string_view text) {
  std::vector<char32_t> result;
  result.reserve(text.size());
  size_t position = 0;
  while (position < text.size()) result.push_back(DecodeCodePoint(text, &position));
  return result;
}

std::string EncodeAll(const std::vector<char32_t>& code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) AppendCodePoint(c, &out);
  return out;
}

size_t CodePointCount(absl::string_view text) {
  size_t count = 0;
  for (char c : text) {
    if (!IsContinuation(static_cast<unsigned char>(c))) ++count;
  }
  return count;
}

bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsPythonPrintable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (IsPythonSpace(c)) return false;
  if ((c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x206F)) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  if (c >= 0xF0000 || (c >= 0xE0000 && c <= 0xE007F)) return false;
  return true;
}

char32_t ToUpperCase(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (InLatinExtendedAPairs(c)) return (c % 2 == 1) ? c - 1 : c;
  if (InLatinExtendedAShiftedPairs(c)) return (c % 2 == 0) ? c - 1 : c;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x3AC && c <= 0x3AF) {
    static constexpr char32_t kAccented[] = {0x386, 0x388, 0x389, 0x38A};
    return kAccented[c - 0x3AC];
  }
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t ToLowerCase(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c == 0x130) return 'i';
  if (InLatinExtendedAPairs(c)) return (c % 2 == 0) ? c + 1 : c;
  if (InLatinExtendedAShiftedPairs(c)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool IsCased(char32_t c) { return ToUpperCase(c) != c || ToLowerCase(c) != c || c == 0xDF || c == 0x138; }

bool IsAlphaNumeric(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  // Beyond ASCII, treat every printable non-space, non-punctuation code point as a letter: CJK, Cyrillic,
  // Greek and accented Latin all are; the symbols that are not are rare in chat text.
  if (c >= 0x2000 && c <= 0x2BFF) return false;  // punctuation, arrows, math, dingbats
  if (c >= 0x3000 && c <= 0x303F) return false;  // CJK punctuation
  if (c >= 0x1F000) return false;                // emoji and symbols
  if (c >= 0xFF00 && c <= 0xFF0F) return false;
  return IsPythonPrintable(c) && !(c >= 0xA1 && c <= 0xBF) && c != 0xD7 && c != 0xF7;
}

std::string Upper(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t position = 0;
  while (position < text.size()) {
    const char32_t c = DecodeCodePoint(text, &position);
    if (c == 0xDF) {
      out += "SS";
    } else {
      AppendCodePoint(ToUpperCase(c), &out);
    }
  }
  return out;
}

std::string Lower(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t position = 0;
  while (position < text.size()) AppendCodePoint(ToLowerCase(DecodeCodePoint(text, &position)), &out);
  return out;
}

std::string Strip(absl::string_view text, const std::string* chars, bool left, bool right) {
  const std::vector<char32_t> code_points = DecodeAll(text);
  std::vector<char32_t> set;
  if (chars != nullptr) set = DecodeAll(*chars);
  auto strippable = [&](char32_t c) {
    return chars == nullptr ? IsPythonSpace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t begin = 0;
  size_t end = code_points.size();
  if (left) {
    while (begin < end && strippable(code_points[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(code_points[end - 1])) --end;
  }
  return EncodeAll(std::vector<char32_t>(code_points.begin() + begin, code_points.begin() + end));
}

std::vector<std::string> SplitLines(absl::string_view text) {
  std::vector<std::string> lines;
  std::string line;
  size_t position = 0;
  bool pending = false;
  while (position < text.size()) {
    const size_t start = position;
    const char32_t c = DecodeCodePoint(text, &position);
    const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                          c == 0x2028 || c == 0x2029;
    if (!boundary) {
      line.append(text.data() + start, position - start);
      pending = true;
      continue;
    }
    if (c == '\r' && position < text.size() && text[position] == '\n') ++position;
    lines.push_back(std::move(line));
    line.clear();
    pending = false;
  }
  if (pending) lines.push_back(std::move(line));
  return lines;
}

}  // namespace llmc::jinja
