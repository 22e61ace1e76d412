"""The JSON Schema corpus (tests/grammar/schema_corpus.json) against python3-jsonschema.

Every schema is a valid draft 2020-12 schema, its valid instances validate and its invalid ones do not
(format assertions on). With LLMC_GRAMMAR_SAMPLER set (ctest "python: schema corpus"), every text the
sampler draws from the compiled grammars parses as JSON and validates: the grammars are sound.

jsonschema checks date-time, time, duration and hostname only with optional packages Debian does not ship,
so this file checks them itself, by the RFCs (3339 and its appendix A, 1123).
"""

import datetime
import json
import os
import re
import subprocess
import unittest

import jsonschema

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "grammar", "schema_corpus.json")

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$")
_DURATION = re.compile(
    r"^P(?:(?:\d+D|\d+M(?:\d+D)?|\d+Y(?:\d+M(?:\d+D)?)?)(?:T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S))?"
    r"|T(?:\d+H(?:\d+M(?:\d+S)?)?|\d+M(?:\d+S)?|\d+S)|\d+W)$")
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def _is_date(text):
    match = _DATE.match(text)
    if not match:
        return False
    try:
        datetime.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return False
    return True


def _is_time(text):
    match = _TIME.match(text)
    if not match:
        return False
    hour, minute, second = int(match[1]), int(match[2]), int(match[3])
    if hour > 23 or minute > 59 or second > 60:
        return False
    if match[6] is not None and (int(match[6]) > 23 or int(match[7]) > 59):
        return False
    return True


def _is_date_time(text):
    parts = re.split("[Tt]", text)
    return len(parts) == 2 and _is_date(parts[0]) and _is_time(parts[1])


def _is_duration(text):
    return bool(_DURATION.match(text))


def _is_hostname(text):
    if not text or len(text) > 253:
        return False
    return all(_LABEL.match(label) for label in text.split("."))


def format_checker():
    """jsonschema's draft 2020-12 checkers, plus the RFC ones it lacks here."""
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
    for name, function in (("date", _is_date), ("time", _is_time), ("date-time", _is_date_time),
                           ("duration", _is_duration), ("hostname", _is_hostname)):
        existing = checker.checkers.get(name)
        if existing is not None:
            # Both must accept: the library's own checker (where present) and the RFC one.
            def combined(instance, first=existing[0], second=function):
                try:
                    if not first(instance):
                        return False
                except Exception:  # pylint: disable=broad-except  # the library's checkers raise on bad input
                    return False
                return not isinstance(instance, str) or second(instance)
            checker.checks(name)(combined)
        else:
            checker.checks(name)(lambda instance, f=function: not isinstance(instance, str) or f(instance))
    return checker


def load_corpus():
    with open(CORPUS, encoding="utf-8") as file:
        return json.load(file)


def validator_for(schema):
    return jsonschema.Draft202012Validator(schema, format_checker=format_checker())


class SchemaCorpusTest(unittest.TestCase):
    def test_corpus_size_and_refusals(self):
        corpus = load_corpus()
        self.assertGreaterEqual(len(corpus), 220)
        refused = [entry for entry in corpus if "refused" in entry]
        self.assertLessEqual(len(refused) * 20, len(corpus), "at most 5% of the corpus is refused")
        names = [entry["name"] for entry in corpus]
        self.assertEqual(len(names), len(set(names)), "names are unique")

    def test_schemas_are_valid(self):
        for entry in load_corpus():
            with self.subTest(entry["name"]):
                jsonschema.Draft202012Validator.check_schema(entry["schema"])

    def test_instances(self):
        for entry in load_corpus():
            if "refused" in entry:
                continue
            validator = validator_for(entry["schema"])
            for instance in entry["valid"]:
                with self.subTest(entry["name"], valid=instance):
                    errors = [error.message for error in validator.iter_errors(instance)]
                    self.assertEqual(errors, [])
            for instance in entry["invalid"]:
                with self.subTest(entry["name"], invalid=instance):
                    self.assertFalse(validator.is_valid(instance))

    def test_format_checkers(self):
        checker = format_checker()
        for name, good, bad in (
                ("date", "2024-02-29", "2023-02-29"),
                ("time", "23:59:59.5+05:30", "24:00:00Z"),
                ("date-time", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00"),
                ("duration", "P1Y2M3DT4H5M6S", "P1Y3D"),
                ("hostname", "a-b.example", "a_b.example")):
            with self.subTest(name):
                self.assertTrue(checker.conforms(good, name))
                self.assertFalse(checker.conforms(bad, name))

    @unittest.skipUnless(os.environ.get("LLMC_GRAMMAR_SAMPLER"), "LLMC_GRAMMAR_SAMPLER is not set")
    def test_sampled_outputs_validate(self):
        self.check_samples(["--samples", "8"])

    @unittest.skipUnless(os.environ.get("LLMC_GRAMMAR_SAMPLER"), "LLMC_GRAMMAR_SAMPLER is not set")
    def test_sampled_outputs_with_whitespace_validate(self):
        self.check_samples(["--samples", "3", "--seed", "7", "--whitespace", "2"])

    def check_samples(self, arguments):
        corpus = {entry["name"]: entry for entry in load_corpus()}
        result = subprocess.run([os.environ["LLMC_GRAMMAR_SAMPLER"], "--corpus", CORPUS] + arguments,
                                capture_output=True, text=True, timeout=240, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        samples = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        compiled = [name for name, entry in corpus.items() if "refused" not in entry]
        self.assertGreaterEqual(len({sample["name"] for sample in samples}), len(compiled) * 0.95)
        validators = {}
        for sample in samples:
            name, text = sample["name"], sample["text"]
            with self.subTest(name, text=text):
                instance = json.loads(text)
                if name not in validators:
                    validators[name] = validator_for(corpus[name]["schema"])
                errors = [error.message for error in validators[name].iter_errors(instance)]
                self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
