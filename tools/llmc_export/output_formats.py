"""How a model writes tool calls and reasoning, read from its chat template and special tokens.

The package manifest records both (docs/model-package.md): `tool_call_format`, one of the worker's parser
names (worker/typed_output/output_format.h), and `reasoning`, the markers around the model's reasoning. The
template is the evidence: it renders past tool calls in the model's own syntax and often spells the syntax out
in the instructions it gives with the tools. Tokens alone are not: a base model's tokenizer carries
<|python_tag|> or <tool_call> too, and a template that never renders tools gives the model no format to follow.
"""
import json
import os
import re
from dataclasses import dataclass
from typing import Iterable, Optional, Tuple

from .config import ExportError

# The worker's names (typed_output::ParseToolCallFormat), vLLM's tool-parser names where one exists.
TOOL_CALL_FORMATS = ("none", "hermes", "qwen3_coder", "llama3_json", "pythonic", "mistral", "deepseek_v3",
                     "deepseek_v31", "harmony")
# Named reasoning markers: what --reasoning-markers accepts besides "auto".
REASONING_MARKERS = {"none": None, "think": ("<think>", "</think>")}
# Markers detected in templates: DeepSeek-R1 / Qwen3 / QwQ style, and Magistral's.
_DETECTED_MARKERS = (("<think>", "</think>"), ("[THINK]", "[/THINK]"))

# OpenAI's harmony (GPT-OSS): messages on channels, tool calls addressed `to=functions.name` on commentary.
_HARMONY_CHANNEL = "<|channel|>"
_HARMONY_RECIPIENT = "to=functions."
_DEEPSEEK_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
_DEEPSEEK_CALL_BEGIN = "<｜tool▁call▁begin｜>"
_DEEPSEEK_SEP = "<｜tool▁sep｜>"
# Llama 3.2 / 4 pythonic instructions: "Respond in the format [func_name1(params_name1=params_value1, ...)]".
_PYTHONIC_INSTRUCTION = re.compile(r"\[\s*func_name\d*\s*\(\s*\w+\s*=")
# Llama 3.1 / 3.2 JSON instructions: 'Respond in the format {"name": function name, "parameters": dictionary ...}'.
_LLAMA3_JSON_INSTRUCTION = re.compile(r'\\?"parameters\\?"\s*:\s*dictionary of argument name')


@dataclass(frozen=True)
class OutputFormats:
    tool_call_format: str = "none"
    reasoning: Optional[Tuple[str, str]] = None  # (start, end) markers, or None: no separate reasoning

    def manifest_fields(self) -> dict:
        """The manifest's fields: tool_call_format always, reasoning only when the model reasons apart."""
        fields = {"tool_call_format": self.tool_call_format}
        if self.reasoning is not None:
            fields["reasoning"] = {"start": self.reasoning[0], "end": self.reasoning[1]}
        return fields


def _deepseek_format(template: str) -> str:
    """deepseek_v31 when the template writes the function name right after <｜tool▁call▁begin｜>
    (`<｜tool▁call▁begin｜>name<｜tool▁sep｜>{json}`), deepseek_v3 when a type comes first
    (`<｜tool▁call▁begin｜>function<｜tool▁sep｜>name\\n```json...`)."""
    for match in re.finditer(re.escape(_DEEPSEEK_CALL_BEGIN), template):
        sep = template.find(_DEEPSEEK_SEP, match.end())
        if sep < 0 or sep - match.end() > 200:
            continue
        between = template[match.end():sep]  # e.g. "' + tool['type'] + '" or "'+ tool['function']['name'] + '"
        if "name" in between:
            return "deepseek_v31"
        if "type" in between or "function" in between:
            return "deepseek_v3"
    return "deepseek_v3"


def is_harmony(template: Optional[str]) -> bool:
    """A harmony template writes channels and addresses calls to functions.name."""
    return bool(template) and _HARMONY_CHANNEL in template and _HARMONY_RECIPIENT in template


def detect_tool_call_format(template: Optional[str]) -> str:
    """The tool-call format a chat template renders (or instructs), "none" when it renders no tool calls."""
    if not template:
        return "none"
    if is_harmony(template):
        # <|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
        return "harmony"
    if "<function=" in template and "<parameter=" in template:
        return "qwen3_coder"  # <tool_call><function=f><parameter=p>v</parameter></function></tool_call>
    if _DEEPSEEK_CALLS_BEGIN in template:
        return _deepseek_format(template)
    if "[TOOL_CALLS]" in template:
        return "mistral"  # [TOOL_CALLS][{...}] (v3) or [TOOL_CALLS]name[ARGS]{...} (v11+)
    if "<arg_key>" in template:
        return "none"  # GLM-4.5's <tool_call>name<arg_key>...: a format this llmc does not parse
    if "<tool_call>" in template:
        return "hermes"  # Hermes, Qwen2.5, Qwen3, QwQ
    if _PYTHONIC_INSTRUCTION.search(template):
        return "pythonic"
    if "<|python_tag|>" in template or _LLAMA3_JSON_INSTRUCTION.search(template):
        return "llama3_json"
    return "none"


def detect_reasoning(template: Optional[str], added_tokens: Iterable[str] = ()) -> Optional[Tuple[str, str]]:
    """The reasoning markers: <think>/</think> when the template handles </think> (Qwen3, QwQ, DeepSeek-R1 and
    V3.1 strip it from past turns or close it in the prompt), or when the tokenizer adds both as tokens and the
    template names <think>; [THINK]/[/THINK] likewise for Magistral. None otherwise."""
    if not template:
        return None
    tokens = set(added_tokens)
    for start, end in _DETECTED_MARKERS:
        if end in template or (start in tokens and end in tokens and start in template):
            return (start, end)
    return None


def detect_output_formats(template: Optional[str], added_tokens: Iterable[str] = ()) -> OutputFormats:
    if is_harmony(template):
        # No markers: harmony's reasoning is its analysis channel, which the worker's harmony parser splits off.
        return OutputFormats("harmony", None)
    return OutputFormats(detect_tool_call_format(template), detect_reasoning(template, added_tokens))


def _token_content(token) -> Optional[str]:
    if isinstance(token, dict):  # an AddedToken as older files spell it
        token = token.get("content")
    return token if isinstance(token, str) else None


def read_template_sources(folder: str) -> Tuple[Optional[str], list]:
    """(every chat template the tokenizer files beside tokenizer.json hold, joined; the added and special
    tokens of tokenizer_config.json). Named templates (a "default" and a "tool_use" one, say) all count: the
    tool-use one is where a tool format shows."""
    config = {}
    config_path = os.path.join(folder, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    templates = []
    raw = config.get("chat_template")
    if isinstance(raw, str):
        templates.append(raw)
    elif isinstance(raw, list):
        templates.extend(entry.get("template") for entry in raw
                         if isinstance(entry, dict) and isinstance(entry.get("template"), str))
    jinja_path = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8") as f:
            templates.append(f.read())
    tokens = []
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        tokens.extend(_token_content(entry) for entry in decoder.values())
    additional = config.get("additional_special_tokens")
    if isinstance(additional, list):
        tokens.extend(_token_content(entry) for entry in additional)
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        tokens.append(_token_content(config.get(key)))
    templates = [t for t in templates if t]
    return ("\n".join(templates) if templates else None), [t for t in tokens if t]


def read_output_formats(tokenizer_path: str) -> OutputFormats:
    """Detects the formats from the tokenizer_config.json (and chat_template.jinja) beside tokenizer.json."""
    template, tokens = read_template_sources(os.path.dirname(os.path.abspath(tokenizer_path)))
    return detect_output_formats(template, tokens)


def resolve_output_formats(detected: OutputFormats, tool_call_format: Optional[str] = None,
                           reasoning_markers: Optional[str] = None) -> OutputFormats:
    """The detected formats with the exporter's overrides applied (None or "auto": keep the detected one)."""
    tool = detected.tool_call_format
    if tool_call_format not in (None, "auto"):
        if tool_call_format not in TOOL_CALL_FORMATS:
            raise ExportError(f"unknown tool-call format '{tool_call_format}' "
                              f"(known: auto, {', '.join(TOOL_CALL_FORMATS)})")
        tool = tool_call_format
    reasoning = detected.reasoning
    if reasoning_markers not in (None, "auto"):
        if reasoning_markers not in REASONING_MARKERS:
            raise ExportError(f"unknown reasoning markers '{reasoning_markers}' "
                              f"(known: auto, {', '.join(REASONING_MARKERS)})")
        reasoning = REASONING_MARKERS[reasoning_markers]
    return OutputFormats(tool, reasoning)
