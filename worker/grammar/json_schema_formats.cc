// String formats as grammars of the string content. Each is a subset of what its RFC allows, chosen so
// that everything produced is valid (calendar dates exist, addresses parse), never the other way round.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/grammar/json_schema_internal.h"

namespace llmc::grammar::json_schema {
namespace {

Expr Exactly(Expr expr, uint32_t count) { return Expr::Repeat(std::move(expr), count, count); }

Expr Alnum() { return Expr::CharClass({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}}); }

// Years 0001-9999 (year 0 does not exist for most validators).
Expr Year() {
  const Expr d = Digit();
  const Expr nonzero = Range('1', '9');
  return Alt({Seq({Lit("000"), nonzero}), Seq({Lit("00"), nonzero, d}), Seq({Lit("0"), nonzero, d, d}),
              Seq({nonzero, d, d, d})});
}

// Years divisible by 4, except centuries not divisible by 400.
Expr LeapYear() {
  const Expr multiple_of_four =
      Alt({Seq({Lit("0"), Chars("48")}), Seq({Chars("2468"), Chars("048")}), Seq({Chars("13579"), Chars("26")})});
  return Alt({Seq({Digit(), Digit(), multiple_of_four}), Seq({multiple_of_four, Lit("00")})});
}

// YYYY-MM-DD of a day that exists.
Expr FullDate() {
  const Expr d = Digit();
  const Expr day_01_09 = Seq({Lit("0"), Range('1', '9')});
  const Expr long_month = Alt({Seq({Lit("0"), Chars("13578")}), Seq({Lit("1"), Chars("02")})});
  const Expr short_month = Alt({Seq({Lit("0"), Chars("469")}), Lit("11")});
  const Expr month_day =
      Alt({Seq({long_month, Lit("-"), Alt({day_01_09, Seq({Chars("12"), d}), Seq({Lit("3"), Chars("01")})})}),
           Seq({short_month, Lit("-"), Alt({day_01_09, Seq({Chars("12"), d}), Lit("30")})}),
           Seq({Lit("02-"), Alt({day_01_09, Seq({Lit("1"), d}), Seq({Lit("2"), Range('0', '8')})})})});
  return Alt({Seq({Year(), Lit("-"), month_day}), Seq({LeapYear(), Lit("-02-29")})});
}

Expr Hour() { return Alt({Seq({Chars("01"), Digit()}), Seq({Lit("2"), Range('0', '3')})}); }
Expr Sexagesimal() { return Seq({Range('0', '5'), Digit()}); }

// HH:MM:SS[.frac](Z|+HH:MM|-HH:MM); no leap second (not every validator takes one).
Expr FullTime() {
  return Seq({Hour(), Lit(":"), Sexagesimal(), Lit(":"), Sexagesimal(),
              Expr::Optional(Seq({Lit("."), Expr::Plus(Digit())})),
              Alt({Lit("Z"), Seq({Chars("+-"), Hour(), Lit(":"), Sexagesimal()})})});
}

// RFC 3339 appendix A.
Expr Duration() {
  const Expr n = Expr::Plus(Digit());
  const Expr second = Seq({n, Lit("S")});
  const Expr minute = Seq({n, Lit("M"), Expr::Optional(second)});
  const Expr hour = Seq({n, Lit("H"), Expr::Optional(minute)});
  const Expr time = Seq({Lit("T"), Alt({hour, minute, second})});
  const Expr day = Seq({n, Lit("D")});
  const Expr month = Seq({n, Lit("M"), Expr::Optional(day)});
  const Expr year = Seq({n, Lit("Y"), Expr::Optional(month)});
  const Expr date = Seq({Alt({day, month, year}), Expr::Optional(time)});
  return Seq({Lit("P"), Alt({date, time, Seq({n, Lit("W")})})});
}

Expr Uuid() {
  const Expr hex = HexDigit();
  return Seq({Exactly(hex, 8), Lit("-"), Exactly(hex, 4), Lit("-"), Exactly(hex, 4), Lit("-"), Exactly(hex, 4),
              Lit("-"), Exactly(hex, 12)});
}

// Dotted quad without leading zeros.
Expr Ipv4() {
  const Expr d = Digit();
  const Expr octet = Alt({Seq({Lit("25"), Range('0', '5')}), Seq({Lit("2"), Range('0', '4'), d}), Seq({Lit("1"), d, d}),
                          Seq({Range('1', '9'), d}), d});
  return Seq({octet, Exactly(Seq({Lit("."), octet}), 3)});
}

// RFC 3986's IPv6address: eight groups, "::" for a run of zero groups, an IPv4 address in the last 32 bits.
Expr Ipv6() {
  const Expr h16 = Expr::Repeat(HexDigit(), 1, 4);
  const Expr ls32 = Alt({Seq({h16, Lit(":"), h16}), Ipv4()});
  const auto groups = [&](uint32_t count) { return Exactly(Seq({h16, Lit(":")}), count); };
  // [ *n( h16 ":" ) h16 ]
  const auto head = [&](uint32_t most) {
    return Expr::Optional(Seq({Expr::Repeat(Seq({h16, Lit(":")}), 0, most), h16}));
  };
  return Alt({Seq({groups(6), ls32}), Seq({Lit("::"), groups(5), ls32}),
              Seq({Expr::Optional(h16), Lit("::"), groups(4), ls32}), Seq({head(1), Lit("::"), groups(3), ls32}),
              Seq({head(2), Lit("::"), groups(2), ls32}), Seq({head(3), Lit("::"), h16, Lit(":"), ls32}),
              Seq({head(4), Lit("::"), ls32}), Seq({head(5), Lit("::"), h16}), Seq({head(6), Lit("::")})});
}

// RFC 1123 labels (letters, digits, inner hyphens). At most 6 labels of at most 41 characters, which keeps
// the name within 253 characters without counting.
Expr Hostname() {
  const Expr label =
      Seq({Alnum(),
           Expr::Optional(Seq(
               {Expr::Repeat(Expr::CharClass({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'-', '-'}}), 0, 39), Alnum()}))});
  return Seq({label, Expr::Repeat(Seq({Lit("."), label}), 0, 5)});
}

// RFC 5321's dot-atom local part @ a hostname.
Expr Email() {
  const Expr atext = Expr::CharClass({{'0', '9'},
                                      {'A', 'Z'},
                                      {'a', 'z'},
                                      {'!', '!'},
                                      {'#', '\''},
                                      {'*', '+'},
                                      {'-', '-'},
                                      {'/', '/'},
                                      {'=', '='},
                                      {'?', '?'},
                                      {'^', '`'},
                                      {'{', '~'}});
  const Expr atom = Expr::Plus(atext);
  return Seq({atom, Expr::Star(Seq({Lit("."), atom})), Lit("@"), Hostname()});
}

// RFC 3986's URI (without IPvFuture literals).
Expr Uri() {
  const std::vector<CodePointRange> unreserved = {{'0', '9'}, {'A', 'Z'}, {'a', 'z'},
                                                  {'-', '.'}, {'_', '_'}, {'~', '~'}};
  const std::vector<CodePointRange> sub_delims = {{'!', '!'}, {'$', '$'}, {'&', ','}, {';', ';'}, {'=', '='}};
  const auto with = [&](std::vector<CodePointRange> extra) {
    std::vector<CodePointRange> ranges = unreserved;
    ranges.insert(ranges.end(), sub_delims.begin(), sub_delims.end());
    ranges.insert(ranges.end(), extra.begin(), extra.end());
    return Expr::CharClass(std::move(ranges));
  };
  const Expr percent = Seq({Lit("%"), HexDigit(), HexDigit()});
  const Expr pchar = Alt({with({{':', ':'}, {'@', '@'}}), percent});
  const Expr scheme = Seq({Expr::CharClass({{'A', 'Z'}, {'a', 'z'}}),
                           Expr::Star(Expr::CharClass({{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'+', '+'}, {'-', '.'}}))});
  const Expr userinfo = Expr::Star(Alt({with({{':', ':'}}), percent}));
  const Expr reg_name = Expr::Star(Alt({with({}), percent}));
  const Expr host = Alt({Seq({Lit("["), Ipv6(), Lit("]")}), reg_name});
  const Expr authority =
      Seq({Expr::Optional(Seq({userinfo, Lit("@")})), host, Expr::Optional(Seq({Lit(":"), Expr::Star(Digit())}))});
  const Expr segments = Expr::Star(Seq({Lit("/"), Expr::Star(pchar)}));
  const Expr rootless = Seq({Expr::Plus(pchar), segments});
  const Expr hier =
      Alt({Seq({Lit("//"), authority, segments}), Seq({Lit("/"), Expr::Optional(rootless)}), rootless, Expr::Empty()});
  const Expr query = Expr::Star(Alt({pchar, Chars("/?")}));
  return Seq({scheme, Lit(":"), hier, Expr::Optional(Seq({Lit("?"), query})), Expr::Optional(Seq({Lit("#"), query}))});
}

}  // namespace

absl::StatusOr<Expr> FormatContent(absl::string_view format) {
  if (format == "date") return FullDate();
  if (format == "time") return FullTime();
  if (format == "date-time") return Seq({FullDate(), Lit("T"), FullTime()});
  if (format == "duration") return Duration();
  if (format == "uuid") return Uuid();
  if (format == "ipv4") return Ipv4();
  if (format == "ipv6") return Ipv6();
  if (format == "hostname") return Hostname();
  if (format == "email") return Email();
  if (format == "uri") return Uri();
  return absl::NotFoundError(absl::StrCat("unknown format '", format, "'"));
}

}  // namespace llmc::grammar::json_schema
