// Numbers: the JSON number grammar, and digit-range grammars for minimum/maximum/exclusive* that decide
// the bounds exactly over decimal text (integer part by digit ranges, fraction by digit-wise comparison).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/grammar/json_schema_internal.h"

namespace llmc::grammar::json_schema {
namespace {

// A double's shortest decimal that reads back as the same double keeps about this many digits exact; an
// exclusive bound on a `number` moves inward by one unit in the last of them, so that no accepted text
// rounds onto the bound itself.
constexpr int kExactDigits = 15;

// value = (-1)^negative * digits * 10^-scale; normalized: no leading zeros, no trailing fraction zeros.
struct Decimal {
  bool negative = false;
  std::string digits = "0";
  int scale = 0;

  void Normalize() {
    while (scale > 0 && digits.size() > 1 && digits.back() == '0') {
      digits.pop_back();
      --scale;
    }
    if (scale > 0 && digits == "0") scale = 0;
    const size_t first = digits.find_first_not_of('0');
    digits = first == std::string::npos ? "0" : digits.substr(first);
    if (digits == "0") {
      negative = false;
      scale = 0;
    }
  }
  bool IsZero() const { return digits == "0"; }
  std::string IntegerPart() const {
    if (scale == 0) return digits;
    if (static_cast<int>(digits.size()) <= scale) return "0";
    return digits.substr(0, digits.size() - scale);
  }
  std::string FractionPart() const {
    if (scale == 0) return "";
    std::string padded = std::string(std::max(0, scale - static_cast<int>(digits.size())), '0') + digits;
    return padded.substr(padded.size() - scale);
  }
  Decimal Negated() const {
    Decimal out = *this;
    out.negative = !negative && !IsZero();
    return out;
  }
};

// Magnitudes of unsigned digit strings.
int CompareDigits(absl::string_view a, absl::string_view b) {
  while (a.size() > 1 && a[0] == '0') a.remove_prefix(1);
  while (b.size() > 1 && b[0] == '0') b.remove_prefix(1);
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

std::string AddDigits(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    const int x = i < a.size() ? a[a.size() - 1 - i] - '0' : 0;
    const int y = i < b.size() ? b[b.size() - 1 - i] - '0' : 0;
    const int sum = x + y + carry;
    out.insert(out.begin(), static_cast<char>('0' + sum % 10));
    carry = sum / 10;
  }
  return out;
}

// a - b, a >= b.
std::string SubtractDigits(const std::string& a, const std::string& b) {
  std::string out;
  int borrow = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    int x = a[a.size() - 1 - i] - '0' - borrow;
    const int y = i < b.size() ? b[b.size() - 1 - i] - '0' : 0;
    borrow = x < y ? 1 : 0;
    out.insert(out.begin(), static_cast<char>('0' + x + borrow * 10 - y));
  }
  const size_t first = out.find_first_not_of('0');
  return first == std::string::npos ? "0" : out.substr(first);
}

void Align(Decimal& a, Decimal& b) {
  while (a.scale < b.scale) {
    a.digits += '0';
    ++a.scale;
  }
  while (b.scale < a.scale) {
    b.digits += '0';
    ++b.scale;
  }
}

int Compare(Decimal a, Decimal b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  Align(a, b);
  const int magnitude = CompareDigits(a.digits, b.digits);
  return a.negative ? -magnitude : magnitude;
}

Decimal Add(Decimal a, Decimal b) {
  Align(a, b);
  Decimal out;
  out.scale = a.scale;
  if (a.negative == b.negative) {
    out.negative = a.negative;
    out.digits = AddDigits(a.digits, b.digits);
  } else if (CompareDigits(a.digits, b.digits) >= 0) {
    out.negative = a.negative;
    out.digits = SubtractDigits(a.digits, b.digits);
  } else {
    out.negative = b.negative;
    out.digits = SubtractDigits(b.digits, a.digits);
  }
  out.Normalize();
  return out;
}

Decimal PowerOfTen(int exponent, bool negative = false) {  // 10^exponent, exponent <= 0
  Decimal out;
  out.digits = "1";
  out.scale = -exponent;
  out.negative = negative;
  return out;
}

// Text of a JSON number (with or without fraction and exponent).
Decimal ParseDecimal(absl::string_view text) {
  Decimal out;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') {
    out.negative = true;
    ++i;
  }
  out.digits.clear();
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) out.digits += text[i];
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      out.digits += text[i];
      ++out.scale;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    const int exponent = std::atoi(std::string(text.substr(i + 1)).c_str());
    out.scale -= exponent;
    while (out.scale < 0) {
      out.digits += '0';
      ++out.scale;
    }
  }
  if (out.digits.empty()) out.digits = "0";
  out.Normalize();
  return out;
}

// Integers exactly (an integral double too: validators compare integers with it exactly); a fractional double
// (below 2^52, so no integer lies between it and its text) as its shortest decimal that reads back as the
// same double, which is what the schema wrote.
Decimal FromJson(const Json& number) {
  if (number.is_number_unsigned()) return ParseDecimal(std::to_string(number.get<uint64_t>()));
  if (number.is_number_integer()) return ParseDecimal(std::to_string(number.get<int64_t>()));
  const double value = number.get<double>();
  char buffer[512];
  if (std::isfinite(value) && std::floor(value) == value) {
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
    return ParseDecimal(buffer);
  }
  for (int precision = 0; precision < 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*e", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return ParseDecimal(buffer);
}

Decimal Floor(const Decimal& value) {
  Decimal integer = ParseDecimal((value.negative ? "-" : "") + value.IntegerPart());
  if (value.negative && value.scale > 0) integer = Add(integer, PowerOfTen(0, true));
  return integer;
}

Decimal Ceil(const Decimal& value) {
  Decimal integer = ParseDecimal((value.negative ? "-" : "") + value.IntegerPart());
  if (!value.negative && value.scale > 0) integer = Add(integer, PowerOfTen(0));
  return integer;
}

// ---- Grammars ----

Expr DigitsExpr(size_t count) {
  return Expr::Repeat(Digit(), static_cast<uint32_t>(count), static_cast<uint32_t>(count));
}

Expr DigitRange(int first, int last) { return Range(static_cast<char>('0' + first), static_cast<char>('0' + last)); }

// Digit strings of one length between lo and hi (same length, lo <= hi).
Expr SameLengthRange(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return Expr::Empty();
  const int l = lo[0] - '0';
  const int h = hi[0] - '0';
  const std::string lo_rest = lo.substr(1);
  const std::string hi_rest = hi.substr(1);
  if (l == h) return Seq({DigitRange(l, l), SameLengthRange(lo_rest, hi_rest)});
  const std::string zeros(lo_rest.size(), '0');
  const std::string nines(lo_rest.size(), '9');
  if (lo_rest == zeros && hi_rest == nines) return Seq({DigitRange(l, h), DigitsExpr(lo_rest.size())});
  std::vector<Expr> choices;
  choices.push_back(Seq({DigitRange(l, l), SameLengthRange(lo_rest, nines)}));
  if (l + 1 <= h - 1) choices.push_back(Seq({DigitRange(l + 1, h - 1), DigitsExpr(lo_rest.size())}));
  choices.push_back(Seq({DigitRange(h, h), SameLengthRange(zeros, hi_rest)}));
  return Alt(std::move(choices));
}

// Canonical non-negative integers (no leading zeros) in [lo, hi]; no hi: unbounded.
Expr UnsignedRange(const std::string& lo, const std::optional<std::string>& hi) {
  if (hi && CompareDigits(lo, *hi) > 0) return Expr::Nothing();
  std::vector<Expr> choices;
  const size_t last_length = hi ? hi->size() : lo.size();
  for (size_t length = lo.size(); length <= last_length; ++length) {
    const std::string first = length == lo.size() ? lo : "1" + std::string(length - 1, '0');
    const std::string last = hi && length == hi->size() ? *hi : std::string(length, '9');
    choices.push_back(SameLengthRange(first, last));
  }
  if (!hi) {
    choices.push_back(Seq({Range('1', '9'), Expr::Repeat(Digit(), static_cast<uint32_t>(lo.size()), kUnbounded)}));
  }
  return Alt(std::move(choices));
}

// Nonempty fraction digit strings F with lo <= 0.F <= hi (no upper bound when `any`).
Expr FractionDigits(const std::string& lo, const std::string& hi, bool any);

// Possibly empty digit strings R with lo <= 0.R <= hi.
Expr FractionRest(const std::string& lo, const std::string& hi, bool any) {
  if (lo.empty() && any) return Expr::Star(Digit());
  if (lo.empty() && hi.empty()) return Expr::Star(Lit("0"));
  return Alt({lo.empty() ? Expr::Empty() : Expr::Nothing(), FractionDigits(lo, hi, any)});
}

Expr FractionDigits(const std::string& lo, const std::string& hi, bool any) {
  const int l = lo.empty() ? 0 : lo[0] - '0';
  const std::string lo_rest = lo.empty() ? "" : lo.substr(1);
  if (any) {
    return Alt({l < 9 ? Seq({DigitRange(l + 1, 9), Expr::Star(Digit())}) : Expr::Nothing(),
                Seq({DigitRange(l, l), FractionRest(lo_rest, "", true)})});
  }
  const int h = hi.empty() ? 0 : hi[0] - '0';
  const std::string hi_rest = hi.empty() ? "" : hi.substr(1);
  if (l == h) return Seq({DigitRange(l, l), FractionRest(lo_rest, hi_rest, false)});
  return Alt({Seq({DigitRange(l, l), FractionRest(lo_rest, "", true)}),
              l + 1 <= h - 1 ? Seq({DigitRange(l + 1, h - 1), Expr::Star(Digit())}) : Expr::Nothing(),
              Seq({DigitRange(h, h), FractionRest("", hi_rest, false)})});
}

// The optional "." fraction of a number whose fraction value must lie in [lo, hi].
Expr FractionSuffix(const std::string& lo, const std::string& hi, bool any) {
  return Alt({lo.empty() ? Expr::Empty() : Expr::Nothing(), Seq({Lit("."), FractionDigits(lo, hi, any)})});
}

std::string Increment(const std::string& digits) { return AddDigits(digits, "1"); }

// Unsigned decimal texts with value in [lo, hi] (lo, hi >= 0); no hi: unbounded.
Expr MagnitudeRange(const Decimal& lo, const std::optional<Decimal>& hi, bool integer) {
  const std::string lo_int = lo.IntegerPart();
  if (integer) return UnsignedRange(lo_int, hi ? std::optional<std::string>(hi->IntegerPart()) : std::nullopt);
  const std::string lo_fraction = lo.FractionPart();
  if (!hi) {
    return Alt({Seq({Lit(lo_int), FractionSuffix(lo_fraction, "", true)}),
                Seq({UnsignedRange(Increment(lo_int), std::nullopt), FractionSuffix("", "", true)})});
  }
  const std::string hi_int = hi->IntegerPart();
  const std::string hi_fraction = hi->FractionPart();
  if (lo_int == hi_int) return Seq({Lit(lo_int), FractionSuffix(lo_fraction, hi_fraction, false)});
  std::vector<Expr> choices;
  choices.push_back(Seq({Lit(lo_int), FractionSuffix(lo_fraction, "", true)}));
  if (CompareDigits(Increment(lo_int), hi_int) < 0) {
    choices.push_back(
        Seq({UnsignedRange(Increment(lo_int), SubtractDigits(hi_int, "1")), FractionSuffix("", "", true)}));
  }
  choices.push_back(Seq({Lit(hi_int), FractionSuffix("", hi_fraction, false)}));
  return Alt(std::move(choices));
}

Expr SignedRange(const std::optional<Decimal>& lo, const std::optional<Decimal>& hi, bool integer) {
  const Decimal zero;
  std::vector<Expr> choices;
  if (!hi || !hi->negative) {
    choices.push_back(MagnitudeRange(lo && !lo->negative ? *lo : zero, hi, integer));
  }
  if (!lo || lo->negative) {
    // Negative integers start at magnitude 1 (0 is the other branch's); fractions need magnitude 0.x.
    Decimal smallest = hi && hi->negative ? hi->Negated() : integer ? PowerOfTen(0) : zero;
    choices.push_back(
        Seq({Lit("-"), MagnitudeRange(smallest, lo ? std::optional<Decimal>(lo->Negated()) : std::nullopt, integer)}));
  }
  return Alt(std::move(choices));
}

Expr GenericNumber(bool integer) {
  Expr integer_part = Alt({Lit("0"), Seq({Range('1', '9'), Expr::Star(Digit())})});
  if (integer) return Seq({Expr::Optional(Lit("-")), std::move(integer_part)});
  return Seq({Expr::Optional(Lit("-")), std::move(integer_part), Expr::Optional(Seq({Lit("."), Expr::Plus(Digit())})),
              Expr::Optional(Seq({Chars("eE"), Expr::Optional(Chars("+-")), Expr::Plus(Digit())}))});
}

struct Bounds {
  std::optional<Decimal> lower, upper;
  bool lower_exclusive = false, upper_exclusive = false;
};

absl::StatusOr<Bounds> ReadBounds(const Json& schema, absl::string_view pointer) {
  Bounds bounds;
  for (const char* keyword : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!schema.contains(keyword)) continue;
    const Json& value = schema.at(keyword);
    if (!value.is_number()) return InvalidValue(keyword, pointer, "not a number");
    const Decimal bound = FromJson(value);
    const std::string name = keyword;
    const bool exclusive = name.rfind("exclusive", 0) == 0;
    const bool lower = name == "minimum" || name == "exclusiveMinimum";
    std::optional<Decimal>& current = lower ? bounds.lower : bounds.upper;
    bool& current_exclusive = lower ? bounds.lower_exclusive : bounds.upper_exclusive;
    const int order = current ? Compare(bound, *current) : (lower ? 1 : -1);
    if ((lower && order > 0) || (!lower && order < 0) || (order == 0 && exclusive)) {
      current = bound;
      current_exclusive = exclusive;
    }
  }
  return bounds;
}

absl::Status CheckMultipleOf(const Json& schema, absl::string_view pointer, bool integer) {
  if (!schema.contains("multipleOf")) return absl::OkStatus();
  const Json& value = schema.at("multipleOf");
  if (!value.is_number() || !(value.get<double>() > 0)) return InvalidValue("multipleOf", pointer, "not positive");
  if (integer && value.get<double>() == 1.0) return absl::OkStatus();
  return Unsupported("multipleOf", pointer, "only multipleOf 1 on integers can be enforced");
}

}  // namespace

absl::StatusOr<Expr> NumberExpr(const Json& schema, absl::string_view pointer, bool integer) {
  RETURN_IF_ERROR(CheckMultipleOf(schema, pointer, integer));
  ASSIGN_OR_RETURN(Bounds bounds, ReadBounds(schema, pointer));
  if (!bounds.lower && !bounds.upper) return GenericNumber(integer);
  std::optional<Decimal> lo = bounds.lower;
  std::optional<Decimal> hi = bounds.upper;
  if (integer) {
    if (lo) lo = bounds.lower_exclusive ? Add(Floor(*lo), PowerOfTen(0)) : Ceil(*lo);
    if (hi) hi = bounds.upper_exclusive ? Add(Ceil(*hi), PowerOfTen(0, true)) : Floor(*hi);
  } else {
    // Text strictly beyond an exclusive bound could still read back as the bound's double; keep a margin of
    // one unit in the 15th significant digit of the integer part.
    const auto step = [&](const Decimal& bound, const char* keyword) -> absl::StatusOr<Decimal> {
      const int exponent = static_cast<int>(bound.IntegerPart().size()) - kExactDigits;
      if (exponent >= 0) {
        return Unsupported(keyword, pointer, "an exclusive bound of 15 or more integer digits on a number");
      }
      return PowerOfTen(exponent);
    };
    if (lo && bounds.lower_exclusive) {
      ASSIGN_OR_RETURN(Decimal margin, step(*lo, "exclusiveMinimum"));
      lo = Add(*lo, margin);
    }
    if (hi && bounds.upper_exclusive) {
      ASSIGN_OR_RETURN(Decimal margin, step(*hi, "exclusiveMaximum"));
      hi = Add(*hi, margin.Negated());
    }
  }
  if (lo && hi && Compare(*lo, *hi) > 0) return Expr::Nothing();
  return SignedRange(lo, hi, integer);
}

absl::StatusOr<bool> NumberSatisfies(const Json& value, const Json& schema, absl::string_view pointer) {
  ASSIGN_OR_RETURN(Bounds bounds, ReadBounds(schema, pointer));
  const Decimal number = FromJson(value);
  if (bounds.lower) {
    const int order = Compare(number, *bounds.lower);
    if (order < 0 || (order == 0 && bounds.lower_exclusive)) return false;
  }
  if (bounds.upper) {
    const int order = Compare(number, *bounds.upper);
    if (order > 0 || (order == 0 && bounds.upper_exclusive)) return false;
  }
  if (schema.contains("multipleOf")) {
    const Json& divisor = schema.at("multipleOf");
    if (divisor.is_number_integer() && value.is_number_integer() && divisor.get<int64_t>() > 0) {
      return value.get<int64_t>() % divisor.get<int64_t>() == 0;
    }
    return Unsupported("multipleOf", pointer, "alongside enum or const with a non-integer");
  }
  return true;
}

}  // namespace llmc::grammar::json_schema
