"""Reference renderer for the chat-template parity tests: jinja2 set up exactly as transformers sets it up.

Usage: render_reference.py CASES.json
CASES.json is a list of {"template": str, "context": object}. Prints a JSON list with, per case, either
{"ok": true, "output": str} or {"ok": false, "phase": "parse"|"render", "raised": bool, "message": str},
where "raised" marks errors from the template's own raise_exception().
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

# strftime_now() renders this instant so that outputs are reproducible (the C++ side fixes the same one).
FIXED_NOW = datetime.datetime(2025, 3, 4, 5, 6, 7)


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    pass


def raise_exception(message):
    raise RaisedByTemplate(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override of jinja2's tojson: plain json.dumps, no HTML escaping.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def render(env, case):
    try:
        template = env.from_string(case["template"])
    except Exception as error:  # noqa: BLE001 - every failure is a result to compare
        return {"ok": False, "phase": "parse", "raised": False, "message": f"{type(error).__name__}: {error}"}
    try:
        return {"ok": True, "output": template.render(**case.get("context", {}))}
    except RaisedByTemplate as error:
        return {"ok": False, "phase": "render", "raised": True, "message": error.message}
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "phase": "render", "raised": False, "message": f"{type(error).__name__}: {error}"}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = make_environment()
    results = [render(env, case) for case in cases]
    sys.stdout.write(json.dumps(results, ensure_ascii=False))


if __name__ == "__main__":
    main()
