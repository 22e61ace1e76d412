"""llmc's harmony chat template (tools/llmc_export/templates/harmony.jinja): what it renders under python3-jinja2
set up as transformers sets it up, how the exporter recognizes it, and the GPT-OSS package that carries it.

The worker's interpreter renders the same conversations byte for byte (tests/jinja/jinja_parity_test.cc).
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

import jinja2
import jinja2.sandbox

import paged_scenario  # noqa: F401  (puts tools/ on sys.path)
import export_model
from llmc_export.output_formats import (TOOL_CALL_FORMATS, OutputFormats, detect_output_formats,
                                        resolve_output_formats)
from llmc_export.package import HARMONY_TEMPLATE, harmony_chat_template

JINJA_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jinja")
sys.path.insert(0, JINJA_TESTS)
import render_reference  # noqa: E402  (tests/jinja: jinja2 as transformers sets it up, strftime_now fixed)

TOKENIZER_MODULES = os.environ.get("LLMC_TOKENIZER_MODULES") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "third_party", "tokenizers")

# The system message with the reference renderer's date (2025-03-04) and the default reasoning effort.
SYSTEM = ("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
          "Knowledge cutoff: 2024-06\nCurrent date: 2025-03-04\n\nReasoning: medium\n\n"
          "# Valid channels: analysis, commentary, final. Channel must be included for every message.")
TOOLS_LINE = "\nCalls to these tools must go to the commentary channel: 'functions'."

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["city"]}}}
WEATHER_NAMESPACE = ("# Tools\n\n## functions\n\nnamespace functions {\n\n"
                     "// Current weather.\ntype get_weather = (_: {\n// The city\ncity: string,\n"
                     "unit?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n"
                     "} // namespace functions")


def render(add_generation_prompt=True, tools=None, environment=None, **context):
    environment = environment or render_reference.make_environment()
    template = environment.from_string(harmony_chat_template())
    return template.render(add_generation_prompt=add_generation_prompt, tools=tools, bos_token="<|startoftext|>",
                           eos_token="<|return|>", **context)


def conversations():
    """The parity corpora: the one every real template renders, and the harmony one."""
    cases = []
    for name in ("conversations.json", "harmony_conversations.json"):
        with open(os.path.join(JINJA_TESTS, name), encoding="utf-8") as f:
            cases.extend(json.load(f))
    return cases


class HarmonyTemplateTest(unittest.TestCase):
    def test_plain_chat(self):
        got = render(messages=[{"role": "user", "content": "Hi"},
                               {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet back."},
                               {"role": "user", "content": [{"type": "text", "text": "Count"},
                                                            {"type": "text", "text": "to two"}]}])
        self.assertEqual(got, SYSTEM + "<|end|>"
                         "<|start|>user<|message|>Hi<|end|>"
                         "<|start|>assistant<|channel|>final<|message|>Hello!<|end|>"  # its reasoning dropped
                         "<|start|>user<|message|>Count\nto two<|end|>"
                         "<|start|>assistant")
        self.assertFalse(render(messages=[{"role": "user", "content": "Hi"}],
                                add_generation_prompt=False).endswith("<|start|>assistant"))

    def test_system_tools_and_user(self):
        got = render(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}],
                     tools=[WEATHER_TOOL, {"type": "function", "function": {"name": "get_location"}}],
                     reasoning_effort="high")
        namespace = WEATHER_NAMESPACE.replace("} // namespace", "type get_location = () => any;\n\n} // namespace")
        self.assertEqual(got, SYSTEM.replace("medium", "high") + TOOLS_LINE + "<|end|>"
                         "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n" + namespace + "<|end|>"
                         "<|start|>user<|message|>Weather?<|end|>"
                         "<|start|>assistant")
        # A system message without tools: the instructions alone.
        self.assertIn("<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>",
                      render(messages=[{"role": "system", "content": "Be brief."}]))

    def test_tool_call_then_result_then_generation_prompt(self):
        got = render(messages=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "reasoning_content": "Use the tool.",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "cold"}], tools=[WEATHER_TOOL])
        self.assertEqual(got, SYSTEM + TOOLS_LINE + "<|end|>"
                         "<|start|>developer<|message|>" + WEATHER_NAMESPACE + "<|end|>"
                         "<|start|>user<|message|>Weather in Oslo?<|end|>"
                         "<|start|>assistant<|channel|>analysis<|message|>Use the tool.<|end|>"
                         "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                         "<|message|>{\"city\": \"Oslo\"}<|call|>"
                         "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>cold<|end|>"
                         "<|start|>assistant")

    def test_tool_results_find_their_calls(self):
        calls = [{"id": "a", "type": "function", "function": {"name": "first", "arguments": "{}"}},
                 {"id": "b", "type": "function", "function": {"name": "second", "arguments": "{\"x\":1}"}}]
        got = render(messages=[{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": calls},
                               {"role": "tool", "tool_call_id": "b", "content": "2"},
                               {"role": "tool", "content": "1"}])  # no id: the calls in order
        self.assertIn("<|message|>{\"x\":1}<|call|>", got)  # string arguments as they are
        self.assertTrue(got.endswith("<|start|>functions.second to=assistant<|channel|>commentary<|message|>2<|end|>"
                                     "<|start|>functions.second to=assistant<|channel|>commentary<|message|>1<|end|>"
                                     "<|start|>assistant"))

    def test_unrenderable_messages_raise(self):
        with self.assertRaises(render_reference.RaisedByTemplate) as raised:
            render(messages=[{"role": "ipython", "content": "x"}])
        self.assertEqual(raised.exception.message, "harmony chat template: cannot render a message with role 'ipython'")
        with self.assertRaises(render_reference.RaisedByTemplate):
            render(messages=[{"role": "user", "content": "x"}, {"role": "tool", "content": "orphan"}])

    def test_without_strftime_now_no_date(self):
        environment = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        got = render(messages=[{"role": "user", "content": "Hi"}], environment=environment)
        self.assertEqual(got, SYSTEM.replace("Current date: 2025-03-04\n", "") + "<|end|>"
                         "<|start|>user<|message|>Hi<|end|><|start|>assistant")

    def test_every_message_is_closed(self):
        """Over the parity corpora: the system message first, every message opened by <|start|> and closed by
        <|end|> (or <|call|> for a call) with one <|message|>, and the generation prompt last."""
        environment = render_reference.make_environment()
        rendered = 0
        for case in conversations():
            context = {"tools": None, "add_generation_prompt": False, **case["context"]}
            result = render_reference.render(environment, {"template": harmony_chat_template(), "context": context})
            if not result["ok"]:
                self.assertTrue(result["raised"], (case["name"], result))
                continue
            rendered += 1
            text = result["output"]
            with self.subTest(case["name"]):
                self.assertTrue(text.startswith("<|start|>system<|message|>"))
                messages = text.split("<|start|>")[1:]
                if context["add_generation_prompt"]:
                    self.assertEqual(messages.pop(), "assistant")
                for message in messages:
                    self.assertEqual(message.count("<|message|>"), 1, message)
                    closer = "<|call|>" if message.startswith("assistant<|channel|>commentary to=") else "<|end|>"
                    self.assertTrue(message.endswith(closer), message)
                    self.assertEqual(message.count("<|end|>") + message.count("<|call|>"), 1, message)
        self.assertGreater(rendered, 30)


class HarmonyOutputFormatsTest(unittest.TestCase):
    def test_detected_as_harmony_without_markers(self):
        self.assertIn("harmony", TOOL_CALL_FORMATS)
        self.assertEqual(detect_output_formats(harmony_chat_template()), OutputFormats("harmony", None))
        # Any template that writes channels and addresses calls to functions; channels alone are not enough.
        self.assertEqual(detect_output_formats("{{ '<|channel|>commentary to=functions.' + name }}"),
                         OutputFormats("harmony", None))
        self.assertEqual(detect_output_formats("{{ '<|channel|>final<|message|>' }}").tool_call_format, "none")
        self.assertEqual(resolve_output_formats(OutputFormats(), "harmony", None), OutputFormats("harmony", None))


def export(*argv):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        code = export_model.main(list(argv))
    return code, stderr.getvalue()


class HarmonyPackageTest(unittest.TestCase):
    """A GPT-OSS package whose tokenizer files have no template carries the harmony one."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.tokenizer = os.path.join(TOKENIZER_MODULES, "node_modules", "@lenml", "tokenizer-gptoss", "models",
                                      "tokenizer.json")
        if not os.path.exists(self.tokenizer):
            raise AssertionError(f"{self.tokenizer}: missing; run scripts/fetch-tokenizers.sh")
        with open(os.path.join(os.path.dirname(self.tokenizer), "tokenizer_config.json"), encoding="utf-8") as f:
            self.assertNotIn("chat_template", json.load(f))  # what makes the exporter supply its own

    def export(self, *flags):
        out = os.path.join(self.tmp.name, "package")
        code, error = export("--random", "--preset", "small-gpt-oss", "--num-layers", "2", "--dtype", "bfloat16",
                             "--eos-token-id", "200002", "--tokenizer", self.tokenizer, "--out", out, *flags)
        self.assertEqual(code, 0, error)
        with open(os.path.join(out, "llmc-model.json"), encoding="utf-8") as f:
            return out, json.load(f)

    def test_small_gpt_oss_package_carries_the_harmony_template(self):
        out, manifest = self.export()
        self.assertEqual((manifest["architecture"], manifest["chat_template"], manifest["chat_template_file"],
                          manifest["tool_call_format"]), ("gpt_oss", "raw", "chat_template.jinja", "harmony"))
        self.assertNotIn("reasoning", manifest)
        with open(os.path.join(out, "chat_template.jinja"), encoding="utf-8") as f, \
                open(HARMONY_TEMPLATE, encoding="utf-8") as g:
            self.assertEqual(f.read(), g.read())
        # A built-in template asked for by name: no Jinja file, and nothing detected from the tokenizer files.
        out, manifest = self.export("--chat-template", "raw")
        self.assertNotIn("chat_template_file", manifest)
        self.assertFalse(os.path.exists(os.path.join(out, "chat_template.jinja")))
        self.assertEqual(manifest["tool_call_format"], "none")


if __name__ == "__main__":
    unittest.main()
