"""python3-jsonschema as the oracle for the JSON Schema corpus (tests/grammar/schema_corpus.json).

Shared by test_schema_corpus.py (the corpus and the grammar sampler's texts) and structured_outputs_client.py
(what the cluster generates). Validation is draft 2020-12 with format assertions on.

jsonschema checks date-time, time, duration and hostname only with optional packages Debian does not ship,
so this module checks them itself, by the RFCs (3339 and its appendix A, 1123).
"""

import datetime
import json
import os
import re

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


def load_corpus(path=CORPUS):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def validator_for(schema):
    return jsonschema.Draft202012Validator(schema, format_checker=format_checker())
