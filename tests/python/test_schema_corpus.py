"""The JSON Schema corpus (tests/grammar/schema_corpus.json) against python3-jsonschema.

Every schema is a valid draft 2020-12 schema, its valid instances validate and its invalid ones do not
(format assertions on). With LLMC_GRAMMAR_SAMPLER set (ctest "python: schema corpus"), every text the
sampler draws from the compiled grammars parses as JSON and validates: the grammars are sound.

The oracle (draft 2020-12 with format assertions, and the RFC checkers jsonschema lacks on Debian) is
schema_oracle.py, which tests/python/structured_outputs_client.py shares.
"""

import json
import os
import subprocess
import unittest

import jsonschema

from schema_oracle import CORPUS, format_checker, load_corpus, validator_for


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
