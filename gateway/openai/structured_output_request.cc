#include "gateway/openai/structured_output_request.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/request_limits.h"
#include "common/status_macros.h"
#include "gateway/openai/openai_error.h"
#include "gateway/openai/openai_request.h"

namespace llmc::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

using Keys = std::initializer_list<std::string_view>;

constexpr size_t kMaxSchemaNameLength = 64;  // OpenAI's bound on response_format.json_schema.name
constexpr size_t kMaxQuoted = 64;

// A client's string quoted in an error message: cut short, at a character boundary, when long.
std::string Quote(std::string_view text) {
  if (text.size() <= kMaxQuoted) return absl::StrCat("\"", std::string(text), "\"");
  size_t end = kMaxQuoted;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return absl::StrCat("\"", std::string(text.substr(0, end)), "...\"");
}

// Keys of an object we define that are not null and not `known` are refused by name, not ignored.
absl::Status RejectUnknownKeys(const json& object, const std::string& prefix, Keys known, const std::string& owner) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_null() || std::find(known.begin(), known.end(), key) != known.end()) continue;
    const std::string param = absl::StrCat(prefix, key);
    return InvalidParameter(param,
                            absl::StrCat("'", param, "' is not supported by this server; ", owner, " takes only ",
                                         absl::StrJoin(std::vector<std::string>(known.begin(), known.end()), ", ")));
  }
  return absl::OkStatus();
}

absl::Status TooLarge(const std::string& param, size_t size, const std::string& as = "") {
  return InvalidParameter(param, absl::StrCat("'", param, "' is ", size, " bytes", as, "; at most ",
                                              limits::kMaxConstraintTextBytes, " are allowed"));
}

// A regex or a grammar: a non-empty string of at most kMaxConstraintTextBytes. The field is present.
absl::StatusOr<std::string> ReadConstraintText(const FieldReader& fields, std::string_view name) {
  ASSIGN_OR_RETURN(std::optional<std::string> text, fields.String(name));
  const std::string param = fields.Param(name);
  if (text->empty()) return InvalidParameter(param, absl::StrCat("'", param, "' must not be empty"));
  if (text->size() > limits::kMaxConstraintTextBytes) return TooLarge(param, text->size());
  return *std::move(text);
}

// A choice constraint: 1 to kMaxChoiceStrings strings (empty ones too). The field is present.
absl::StatusOr<v1::ChoiceConstraint> ReadChoices(const FieldReader& fields, std::string_view name) {
  const json& value = *fields.Find(name);
  const std::string param = fields.Param(name);
  if (!value.is_array()) return fields.WrongType(name, value, "an array of strings");
  if (value.empty()) return InvalidParameter(param, absl::StrCat("'", param, "' must hold at least one string"));
  if (static_cast<int64_t>(value.size()) > limits::kMaxChoiceStrings) {
    return InvalidParameter(param, absl::StrCat("'", param, "' may hold at most ", limits::kMaxChoiceStrings,
                                                " strings, got ", value.size()));
  }
  v1::ChoiceConstraint choice;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      return InvalidParameter(param, absl::StrCat("'", param, "' must hold only strings, but entry ", i, " is ",
                                                  DescribeJsonType(value[i])));
    }
    const std::string& text = value[i].get_ref<const std::string&>();
    if (text.size() > limits::kMaxChoiceStringBytes) {
      return InvalidParameter(param, absl::StrCat("entry ", i, " of '", param, "' is ", text.size(), " bytes; at most ",
                                                  limits::kMaxChoiceStringBytes, " are allowed"));
    }
    choice.add_choices(text);
  }
  return choice;
}

// A JSON schema (an object or a boolean), compact; the field is present at `path` from the body's root. Given
// as JSON it is printed from the order-keeping parse; where `text_allowed` (vLLM's json and guided_json) it may
// also be a string holding the schema's JSON.
absl::StatusOr<std::string> ReadSchema(const FieldReader& fields, std::string_view name, Keys path, bool text_allowed,
                                       OrderedBody& ordered) {
  const json& value = *fields.Find(name);
  const std::string param = fields.Param(name);
  std::string text;
  if (value.is_object() || value.is_boolean()) {
    const ordered_json* node = &ordered.Get();
    for (std::string_view key : path) node = &node->at(std::string(key));
    text = DumpJson(*node);
  } else if (value.is_string() && text_allowed) {
    const std::string& given = value.get_ref<const std::string&>();
    if (given.size() > limits::kMaxConstraintTextBytes) return TooLarge(param, given.size());
    RETURN_IF_ERROR(CheckJsonText(given, param, absl::StrCat("the JSON schema in '", param, "'")));
    ordered_json schema;
    try {
      schema = ordered_json::parse(given);
    } catch (const json::exception& e) {
      return InvalidParameter(
          param, absl::StrCat("the string in '", param,
                              "' must hold a JSON schema, but it is not valid JSON: ", JsonParseErrorDetail(e)));
    }
    if (!schema.is_object() && !schema.is_boolean()) {
      return InvalidParameter(param, absl::StrCat("the string in '", param,
                                                  "' must hold a JSON schema (an object or a boolean), not JSON of "
                                                  "type ",
                                                  schema.type_name()));
    }
    text = DumpJson(schema);
  } else {
    return fields.WrongType(name, value,
                            text_allowed ? "a JSON schema (an object or a boolean) or a string holding one"
                                         : "a JSON schema (an object or a boolean)");
  }
  if (text.size() > limits::kMaxConstraintTextBytes) return TooLarge(param, text.size(), " as compact JSON");
  return text;
}

absl::Status CheckSchemaName(const FieldReader& fields) {
  ASSIGN_OR_RETURN(const std::optional<std::string> name, fields.String("name"));
  const std::string param = fields.Param("name");
  if (!name.has_value()) return InvalidParameter(param, absl::StrCat("'", param, "' is required"));
  const bool valid =
      !name->empty() && name->size() <= kMaxSchemaNameLength &&
      std::all_of(name->begin(), name->end(), [](char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-'; });
  if (!valid) {
    return InvalidParameter(param, absl::StrCat("'", param, "' must be 1 to ", kMaxSchemaNameLength,
                                                " characters of a-z, A-Z, 0-9, '_' and '-', got ", Quote(*name)));
  }
  return absl::OkStatus();
}

// OpenAI's response_format: text (no constraint), json_object, or json_schema.
absl::StatusOr<std::optional<v1::OutputConstraint>> ParseResponseFormat(const FieldReader& body, OrderedBody& ordered) {
  const json* format = body.Find("response_format");
  if (format == nullptr) return std::nullopt;
  if (!format->is_object()) return body.WrongType("response_format", *format, "an object");
  const FieldReader fields(*format, "response_format.");
  ASSIGN_OR_RETURN(const std::optional<std::string> type, fields.String("type"));
  if (!type.has_value()) {
    return InvalidParameter("response_format.type",
                            "'response_format.type' is required: 'text', 'json_object' or 'json_schema'");
  }
  v1::OutputConstraint constraint;
  constraint.set_source("response_format");
  if (*type == "text" || *type == "json_object") {
    RETURN_IF_ERROR(RejectUnknownKeys(*format, "response_format.", {"type"},
                                      absl::StrCat("a response_format of type '", *type, "'")));
    if (*type == "text") return std::nullopt;
    constraint.set_json_object(true);
    return constraint;
  }
  if (*type != "json_schema") {
    return InvalidParameter("response_format.type",
                            absl::StrCat("response_format type ", Quote(*type),
                                         " is not supported; use 'text', 'json_object' or 'json_schema'"));
  }
  RETURN_IF_ERROR(RejectUnknownKeys(*format, "response_format.", {"type", "json_schema"},
                                    "a response_format of type 'json_schema'"));
  const json* spec = fields.Find("json_schema");
  if (spec == nullptr) {
    return InvalidParameter("response_format.json_schema",
                            "'response_format.json_schema' is required with type 'json_schema'");
  }
  if (!spec->is_object()) return fields.WrongType("json_schema", *spec, "an object");
  const FieldReader spec_fields(*spec, "response_format.json_schema.");
  RETURN_IF_ERROR(RejectUnknownKeys(*spec, "response_format.json_schema.", {"name", "description", "schema", "strict"},
                                    "'response_format.json_schema'"));
  RETURN_IF_ERROR(CheckSchemaName(spec_fields));
  // The description only tells the model what the format is for: there is nothing in it to enforce.
  RETURN_IF_ERROR(spec_fields.String("description").status());
  ASSIGN_OR_RETURN(const std::optional<bool> strict, spec_fields.Bool("strict"));
  if (spec_fields.Find("schema") == nullptr) {
    return InvalidParameter("response_format.json_schema.schema",
                            "'response_format.json_schema.schema' is required: the JSON schema the output must match");
  }
  ASSIGN_OR_RETURN(std::string schema, ReadSchema(spec_fields, "schema", {"response_format", "json_schema", "schema"},
                                                  /*text_allowed=*/false, ordered));
  constraint.set_json_schema(std::move(schema));
  constraint.set_strict(strict.value_or(false));
  return constraint;
}

// One constraint kind of structured_outputs or of the guided_* aliases, whose field `name` is present.
absl::StatusOr<v1::OutputConstraint> ReadConstraint(const FieldReader& fields, std::string_view name,
                                                    std::string_view kind, Keys path, OrderedBody& ordered) {
  v1::OutputConstraint constraint;
  constraint.set_source(fields.Param(name));
  if (kind == "json") {
    ASSIGN_OR_RETURN(std::string schema, ReadSchema(fields, name, path, /*text_allowed=*/true, ordered));
    constraint.set_json_schema(std::move(schema));
  } else if (kind == "regex") {
    ASSIGN_OR_RETURN(std::string regex, ReadConstraintText(fields, name));
    constraint.set_regex(std::move(regex));
  } else if (kind == "grammar") {
    ASSIGN_OR_RETURN(std::string grammar, ReadConstraintText(fields, name));
    constraint.set_grammar(std::move(grammar));
  } else {
    ASSIGN_OR_RETURN(*constraint.mutable_choice(), ReadChoices(fields, name));
  }
  return constraint;
}

// vLLM's structured_outputs: exactly one of json, regex, choice, grammar and json_object (true).
absl::StatusOr<std::optional<v1::OutputConstraint>> ParseStructuredOutputs(const FieldReader& body,
                                                                           OrderedBody& ordered) {
  const json* spec = body.Find("structured_outputs");
  if (spec == nullptr) return std::nullopt;
  if (!spec->is_object()) return body.WrongType("structured_outputs", *spec, "an object");
  RETURN_IF_ERROR(RejectUnknownKeys(*spec, "structured_outputs.", {"json", "regex", "choice", "grammar", "json_object"},
                                    "'structured_outputs'"));
  const FieldReader fields(*spec, "structured_outputs.");
  ASSIGN_OR_RETURN(const std::optional<bool> json_object, fields.Bool("json_object"));
  std::vector<std::string> given;
  for (const char* kind : {"json", "regex", "choice", "grammar"}) {
    if (fields.Find(kind) != nullptr) given.push_back(kind);
  }
  if (json_object.value_or(false)) given.push_back("json_object");
  if (given.empty()) {
    return InvalidParameter("structured_outputs",
                            "'structured_outputs' sets no constraint: give one of json, regex, choice, grammar, or "
                            "json_object: true");
  }
  if (given.size() > 1) {
    return InvalidParameter(
        "structured_outputs",
        absl::StrCat("'structured_outputs' may give only one constraint, got ", absl::StrJoin(given, " and ")));
  }
  if (given.front() == "json_object") {
    v1::OutputConstraint constraint;
    constraint.set_source("structured_outputs.json_object");
    constraint.set_json_object(true);
    return constraint;
  }
  return ReadConstraint(fields, given.front(), given.front(), {"structured_outputs", given.front()}, ordered);
}

// vLLM's older top-level aliases of structured_outputs.
absl::Status ParseGuided(const FieldReader& body, OrderedBody& ordered, std::vector<v1::OutputConstraint>& found) {
  if (body.Find("guided_decoding_backend") != nullptr) {
    return InvalidParameter("guided_decoding_backend",
                            "'guided_decoding_backend' is not supported: this server has one structured-output "
                            "engine, which cannot be chosen per request");
  }
  if (body.Find("guided_whitespace_pattern") != nullptr) {
    return InvalidParameter("guided_whitespace_pattern", "'guided_whitespace_pattern' is not supported by this server");
  }
  for (const auto& [name, kind] : {std::pair<std::string_view, std::string_view>{"guided_json", "json"},
                                   {"guided_regex", "regex"},
                                   {"guided_choice", "choice"},
                                   {"guided_grammar", "grammar"}}) {
    if (body.Find(name) == nullptr) continue;
    ASSIGN_OR_RETURN(v1::OutputConstraint constraint, ReadConstraint(body, name, kind, {name}, ordered));
    found.push_back(std::move(constraint));
  }
  return absl::OkStatus();
}

// A logit_bias key: a token id in decimal.
std::optional<int32_t> ParseTokenIdKey(const std::string& key) {
  if (key.empty() || !std::all_of(key.begin(), key.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    return std::nullopt;
  }
  uint64_t id = 0;
  if (!absl::SimpleAtoi(key, &id) || id > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return std::nullopt;
  }
  return static_cast<int32_t>(id);
}

absl::Status ParseLogitBias(const FieldReader& body, v1::SamplingParams& sampling) {
  const json* bias = body.Find("logit_bias");
  if (bias == nullptr) return absl::OkStatus();
  if (!bias->is_object()) return body.WrongType("logit_bias", *bias, "an object mapping token ids to numbers");
  if (static_cast<int64_t>(bias->size()) > limits::kMaxLogitBiasEntries) {
    return InvalidParameter("logit_bias", absl::StrCat("'logit_bias' may hold at most ", limits::kMaxLogitBiasEntries,
                                                       " entries, got ", bias->size()));
  }
  auto& out = *sampling.mutable_logit_bias();
  for (const auto& [key, value] : bias->items()) {
    const std::optional<int32_t> id = ParseTokenIdKey(key);
    if (!id.has_value()) {
      return InvalidParameter("logit_bias", absl::StrCat("'logit_bias' key ", Quote(key),
                                                         " is not a token id (a decimal integer from 0 to ",
                                                         std::numeric_limits<int32_t>::max(), ")"));
    }
    if (!value.is_number()) {
      return InvalidParameter("logit_bias", absl::StrCat("'logit_bias' value for token ", Quote(key),
                                                         " must be a number, not ", DescribeJsonType(value)));
    }
    const double number = value.get<double>();
    if (!limits::kLogitBias.Contains(number)) {
      return InvalidParameter("logit_bias", absl::StrCat("'logit_bias' value for token ", Quote(key), " must be ",
                                                         limits::kLogitBias.Describe(), ", got ", DumpJson(value)));
    }
    if (!out.insert({*id, static_cast<float>(number)}).second) {
      return InvalidParameter("logit_bias", absl::StrCat("'logit_bias' names token ", *id, " more than once"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseAllowedTokenIds(const FieldReader& body, v1::SamplingParams& sampling) {
  const json* ids = body.Find("allowed_token_ids");
  if (ids == nullptr) return absl::OkStatus();
  if (!ids->is_array()) return body.WrongType("allowed_token_ids", *ids, "an array of token ids");
  if (static_cast<int64_t>(ids->size()) > limits::kMaxAllowedTokenIds) {
    return InvalidParameter("allowed_token_ids", absl::StrCat("'allowed_token_ids' may hold at most ",
                                                              limits::kMaxAllowedTokenIds, " ids, got ", ids->size()));
  }
  ASSIGN_OR_RETURN(const std::vector<int32_t> read, ReadTokenIds(*ids, "allowed_token_ids"));
  sampling.mutable_allowed_token_ids()->Add(read.begin(), read.end());
  return absl::OkStatus();
}

absl::Status ParseBadWords(const FieldReader& body, v1::SamplingParams& sampling) {
  const json* words = body.Find("bad_words");
  if (words == nullptr) return absl::OkStatus();
  if (!words->is_array()) return body.WrongType("bad_words", *words, "an array of strings");
  if (static_cast<int64_t>(words->size()) > limits::kMaxBadWords) {
    return InvalidParameter("bad_words", absl::StrCat("'bad_words' may hold at most ", limits::kMaxBadWords,
                                                      " words, got ", words->size()));
  }
  for (size_t i = 0; i < words->size(); ++i) {
    const json& word = (*words)[i];
    if (!word.is_string()) {
      return InvalidParameter("bad_words", absl::StrCat("'bad_words' must hold only strings, but entry ", i, " is ",
                                                        DescribeJsonType(word)));
    }
    const std::string& text = word.get_ref<const std::string&>();
    if (text.empty()) return InvalidParameter("bad_words", absl::StrCat("entry ", i, " of 'bad_words' is empty"));
    if (text.size() > limits::kMaxBadWordBytes) {
      return InvalidParameter("bad_words", absl::StrCat("entry ", i, " of 'bad_words' is ", text.size(),
                                                        " bytes; at most ", limits::kMaxBadWordBytes, " are allowed"));
    }
    sampling.add_bad_words(text);
  }
  return absl::OkStatus();
}

// Beam search ranks whole beams by their logprobs; masking and biasing tokens under it is not implemented.
absl::Status RejectWithBeamSearch(const v1::SamplingParams& sampling) {
  if (sampling.beam_width() == 0) return absl::OkStatus();
  if (sampling.has_constraint()) {
    return InvalidParameter(sampling.constraint().source(),
                            absl::StrCat("structured outputs are not available with use_beam_search ('",
                                         sampling.constraint().source(), "' constrains the output)"));
  }
  std::string field;
  if (!sampling.logit_bias().empty()) field = "logit_bias";
  if (field.empty() && !sampling.allowed_token_ids().empty()) field = "allowed_token_ids";
  if (field.empty() && !sampling.bad_words().empty()) field = "bad_words";
  if (field.empty()) return absl::OkStatus();
  return InvalidParameter(field, absl::StrCat("'", field, "' is not available with 'use_beam_search': true"));
}

}  // namespace

absl::Status ParseStructuredOutput(const json& body, OrderedBody& ordered, v1::SamplingParams& sampling) {
  const FieldReader fields(body);
  std::vector<v1::OutputConstraint> found;
  ASSIGN_OR_RETURN(std::optional<v1::OutputConstraint> format, ParseResponseFormat(fields, ordered));
  if (format.has_value()) found.push_back(*std::move(format));
  ASSIGN_OR_RETURN(std::optional<v1::OutputConstraint> outputs, ParseStructuredOutputs(fields, ordered));
  if (outputs.has_value()) found.push_back(*std::move(outputs));
  RETURN_IF_ERROR(ParseGuided(fields, ordered, found));
  if (found.size() > 1) {
    return InvalidParameter(found[1].source(), absl::StrCat("'", found[0].source(), "' and '", found[1].source(),
                                                            "' both constrain the output; give only one of them"));
  }
  if (!found.empty()) *sampling.mutable_constraint() = std::move(found.front());
  RETURN_IF_ERROR(ParseLogitBias(fields, sampling));
  RETURN_IF_ERROR(ParseAllowedTokenIds(fields, sampling));
  RETURN_IF_ERROR(ParseBadWords(fields, sampling));
  return RejectWithBeamSearch(sampling);
}

}  // namespace llmc::gateway
