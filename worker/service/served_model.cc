#include "worker/service/served_model.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace llmc::worker {

ServedModel MakeServedModel(const engine::Engine& engine, const tokenizer::Tokenizer& tokenizer,
                            const std::string& name) {
  const model::ModelManifest& manifest = engine.manifest();
  ServedModel served;
  served.info.set_name(name.empty() ? manifest.name : name);
  served.info.set_max_context_length(static_cast<uint32_t>(engine.max_model_len()));
  served.info.set_chat_template(manifest.chat_template);
  served.info.set_architecture(manifest.architecture);
  served.info.set_dtype(engine.dtype());
  served.info.set_quantization(manifest.quantization);
  served.info.set_embedding_pooling(manifest.embedding_pooling);
  served.embedding_size = manifest.hidden_size;
  served.info.set_device(engine.device());
  served.info.set_vocab_size(static_cast<uint32_t>(manifest.vocab_size));
  served.tokenizer = &tokenizer;
  // ReadModelManifest has checked the name; a manifest made in code with another one means no tool calls.
  absl::StatusOr<typed_output::ToolCallFormat> tool_call_format =
      typed_output::ParseToolCallFormat(manifest.tool_call_format);
  if (tool_call_format.ok()) {
    served.tool_call_format = *tool_call_format;
  } else {
    LLMC_LOG(Warning) << "tool calls will be read as content: " << tool_call_format.status().message();
  }
  served.reasoning = {manifest.reasoning_start, manifest.reasoning_end};
  if (!manifest.chat_template.empty()) {
    absl::StatusOr<const tokenizer::ChatTemplate*> chat_template = tokenizer::FindChatTemplate(manifest.chat_template);
    if (chat_template.ok()) {
      served.chat_template = *chat_template;
    } else {
      LLMC_LOG(Warning) << "chat requests will be refused: " << chat_template.status().message();
    }
  }
  return served;
}

absl::Status ApplyOutputFormatOverrides(const std::string& tool_call_parser, const std::string& reasoning_parser,
                                        ServedModel& served) {
  if (tool_call_parser != "auto") {
    absl::StatusOr<typed_output::ToolCallFormat> format = typed_output::ParseToolCallFormat(tool_call_parser);
    if (!format.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tool_call_parser: ", format.status().message(), " (or auto, the package's)"));
    }
    served.tool_call_format = *format;
  }
  if (reasoning_parser == "none") {
    served.reasoning = {};
  } else if (reasoning_parser == "think") {
    served.reasoning = {"<think>", "</think>"};
  } else if (reasoning_parser != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("reasoning_parser must be auto, none or think, got '", reasoning_parser, "'"));
  }
  return absl::OkStatus();
}

namespace {

// One element of the pattern below: a byte class, repeated once, at most once, at least once or any times.
struct PatternItem {
  enum class Repeat { kOnce, kOptional, kPlus, kStar };
  bool (*matches)(unsigned char c);
  Repeat repeat;
};

// std::regex's \s and \w in the "C" locale.
bool IsSpace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool IsWord(unsigned char c) { return std::isalnum(c) != 0 || c == '_'; }

template <char kChar>
bool Is(unsigned char c) {
  return c == static_cast<unsigned char>(kChar);
}

using R = PatternItem::Repeat;
// {%-?\s*for\s+[\w, ]+\s+in\s+[^%]*content
constexpr PatternItem kLoopOverContent[] = {
    {Is<'{'>, R::kOnce},
    {Is<'%'>, R::kOnce},
    {Is<'-'>, R::kOptional},
    {IsSpace, R::kStar},
    {Is<'f'>, R::kOnce},
    {Is<'o'>, R::kOnce},
    {Is<'r'>, R::kOnce},
    {IsSpace, R::kPlus},
    {[](unsigned char c) { return IsWord(c) || c == ',' || c == ' '; }, R::kPlus},
    {IsSpace, R::kPlus},
    {Is<'i'>, R::kOnce},
    {Is<'n'>, R::kOnce},
    {IsSpace, R::kPlus},
    {[](unsigned char c) { return c != '%'; }, R::kStar},
    {Is<'c'>, R::kOnce},
    {Is<'o'>, R::kOnce},
    {Is<'n'>, R::kOnce},
    {Is<'t'>, R::kOnce},
    {Is<'e'>, R::kOnce},
    {Is<'n'>, R::kOnce},
    {Is<'t'>, R::kOnce},
};
constexpr size_t kItems = sizeof(kLoopOverContent) / sizeof(kLoopOverContent[0]);
static_assert(kItems < 64);

bool MayBeSkipped(const PatternItem& item) { return item.repeat == R::kOptional || item.repeat == R::kStar; }

// The items that may consume the next byte when item `next` is the first not yet matched (bit kItems: the
// whole pattern may end here).
uint64_t Reachable(size_t next) {
  uint64_t set = 0;
  for (size_t i = next; i < kItems; ++i) {
    set |= uint64_t{1} << i;
    if (!MayBeSkipped(kLoopOverContent[i])) return set;
  }
  return set | (uint64_t{1} << kItems);
}

}  // namespace

// Searches with the set of pattern positions alive after each byte (a position automaton): one pass over the
// text, a fixed amount of work per byte, whatever the text. std::regex backtracked here, recursing once per
// byte, so a long template could overflow the stack.
bool TemplateReadsContentParts(const std::string& source) {
  const uint64_t start = Reachable(0);
  uint64_t alive = start;  // items that may consume the next byte
  for (const char ch : source) {
    const unsigned char c = static_cast<unsigned char>(ch);
    uint64_t next = start;  // a search: a match may begin at any byte
    for (size_t i = 0; i < kItems; ++i) {
      if ((alive >> i & 1) == 0 || !kLoopOverContent[i].matches(c)) continue;
      const R repeat = kLoopOverContent[i].repeat;
      if (repeat == R::kPlus || repeat == R::kStar) next |= uint64_t{1} << i;
      next |= Reachable(i + 1);
    }
    if (next >> kItems & 1) return true;
    alive = next;
  }
  return false;
}

absl::Status LoadPackageChatTemplate(const std::string& package_dir, const model::ModelManifest& manifest,
                                     ServedModel& served) {
  for (const auto& [name, token] : manifest.special_tokens) served.special_tokens[name] = token;
  if (manifest.chat_template_file.empty()) return absl::OkStatus();
  const std::string path = absl::StrCat(package_dir, "/", manifest.chat_template_file);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the model's chat template ", path));
  std::stringstream source;
  source << in.rdbuf();
  absl::StatusOr<std::unique_ptr<jinja::Template>> parsed = jinja::Template::Parse(source.str(), {});
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  served.jinja_template = *std::move(parsed);
  served.template_reads_content_parts = TemplateReadsContentParts(source.str());
  served.info.set_chat_template(manifest.chat_template_file);
  return absl::OkStatus();
}

v1::WorkerLoad ToWorkerLoad(const engine::EngineLoad& load) {
  v1::WorkerLoad out;
  out.set_num_waiting(static_cast<uint32_t>(load.num_waiting));
  out.set_num_running(static_cast<uint32_t>(load.num_running));
  out.set_kv_cache_usage(static_cast<float>(load.kv_cache_usage()));
  out.set_max_running(static_cast<uint32_t>(load.max_running));
  out.set_max_waiting(static_cast<uint32_t>(load.max_waiting));
  out.set_tokens_per_second(static_cast<float>(load.tokens_per_second));
  out.set_pending_prefill_tokens(static_cast<uint64_t>(load.pending_prefill_tokens));
  out.set_prefill_tokens_per_second(static_cast<float>(load.prefill_tokens_per_second));
  return out;
}

std::string DefaultWorkerId() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return absl::StrCat("worker-", ::getpid());
  return absl::StrCat(host, "-", ::getpid());
}

const char* WorkerVersion() { return LLMC_VERSION; }

}  // namespace llmc::worker
