"""Structured outputs through a running llmc gateway, checked by oracles that hold for any model weights.

Run by tests/gateway/structured_outputs_cluster_test.cc against a real controller, worker and gateway serving
the small random-weight model (it cannot follow instructions, so nothing here depends on what it says; only
on what the constraint allows it to say):

  structured_outputs_client.py --base-url http://127.0.0.1:PORT --model llmc-small --part corpus
      Every schema of tests/grammar/schema_corpus.json as a chat request with response_format json_schema:
      every answer that finished ("stop") parses as JSON and validates under python3-jsonschema (draft
      2020-12, format assertions on; schema_oracle.py); a refused schema is a 400 whose message names the
      keyword.
  structured_outputs_client.py ... --part features
      Greedy answers equal streamed or not; structured_outputs.regex (re.fullmatch), guided_choice, GBNF
      grammars (re and a hand-written checker), structured_outputs.json / json_object, guided_json as a
      string, and response_format on /v1/completions.

Prints one "ok ..." line per check and the counts; "FAIL ..." lines and exit code 1 when anything failed.
Standard library and python3-jsonschema only; every request is bounded by a timeout.
"""

import argparse
import concurrent.futures
import json
import re
import sys
import threading
import time
import urllib.error
import urllib.request

from schema_oracle import CORPUS, load_corpus, validator_for

REQUEST_TIMEOUT_S = 120


class Failures:
    """Failed checks, from any thread."""

    def __init__(self):
        self.messages = []
        self._lock = threading.Lock()

    def add(self, message):
        with self._lock:
            self.messages.append(message)
            print(f"FAIL {message}", flush=True)

    def check(self, condition, message):
        if not condition:
            self.add(message)
        return condition


def post(base_url, path, body):
    """(status, parsed JSON or None, raw text) of one POST."""
    request = urllib.request.Request(base_url + path, data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
            status, raw = response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read().decode("utf-8", "replace")
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return status, parsed, raw


def post_stream(base_url, path, body):
    """(status, {index: text}, {index: finish_reason}, error) of a streamed POST, deltas reassembled."""
    body = dict(body, stream=True)
    request = urllib.request.Request(base_url + path, data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"}, method="POST")
    texts, finishes = {}, {}
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
            done = False
            for line in response:
                line = line.decode("utf-8").rstrip("\n")
                if not line.startswith("data: "):
                    continue
                data = line[len("data: "):]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    return response.status, texts, finishes, f"error event {data}"
                for choice in chunk.get("choices", []):
                    index = choice["index"]
                    piece = choice["delta"].get("content") if "delta" in choice else choice.get("text")
                    texts[index] = texts.get(index, "") + (piece or "")
                    if choice.get("finish_reason") is not None:
                        finishes[index] = choice["finish_reason"]
            return response.status, texts, finishes, None if done else "the stream ended without [DONE]"
    except urllib.error.HTTPError as error:
        return error.code, texts, finishes, error.read().decode("utf-8", "replace")


def chat(model, content, max_tokens, **fields):
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
    body.update(fields)
    return body


def answers(parsed):
    """(text, finish_reason) of every choice of a chat or completions answer."""
    out = []
    for choice in parsed["choices"]:
        text = choice["message"]["content"] if "message" in choice else choice["text"]
        out.append((text or "", choice["finish_reason"]))
    return out


def error_message(parsed):
    """The OpenAI error envelope's message, or None when the body is not one."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("error"), dict):
        return None
    error = parsed["error"]
    if not isinstance(error.get("message"), str) or not isinstance(error.get("type"), str):
        return None
    if "param" not in error or "code" not in error:
        return None
    return error["message"]


class Counts:
    """Requests answered, answers, finished answers (finish_reason "stop") and those the oracle accepted."""

    def __init__(self):
        self.requests = 0
        self.answers = 0
        self.finished = 0
        self.validated = 0
        self._lock = threading.Lock()

    def add(self, requests=0, answers=0, finished=0, validated=0):
        with self._lock:
            self.requests += requests
            self.answers += answers
            self.finished += finished
            self.validated += validated

    def __str__(self):
        return (f"{self.requests} requests, {self.answers} answers, {self.finished} finished, "
                f"{self.validated} validated")


def check_json_answers(label, schema, parsed, counts, failures):
    """Every finished answer parses as JSON and validates against `schema`."""
    validator = validator_for(schema)
    for index, (text, finish) in enumerate(answers(parsed)):
        counts.add(answers=1)
        failures.check(finish in ("stop", "length"), f"{label} choice {index}: finish_reason {finish!r}")
        if finish != "stop":
            continue
        counts.add(finished=1)
        try:
            instance = json.loads(text)
        except ValueError as error:
            failures.add(f"{label} choice {index}: finished answer is not JSON ({error}): {text!r}")
            continue
        errors = [error.message for error in validator.iter_errors(instance)]
        if failures.check(not errors, f"{label} choice {index}: {text!r} does not validate: {errors[:3]}"):
            counts.add(validated=1)


# --- part "corpus" -------------------------------------------------------------------------------------------


def corpus_request(model, entry, max_tokens, n, seed):
    json_schema = {"name": entry["name"], "schema": entry["schema"], "strict": bool(entry.get("strict", False))}
    return chat(model, f"Give me {entry['name'].replace('_', ' ')} as JSON.", max_tokens, n=n, temperature=1,
                seed=seed, response_format={"type": "json_schema", "json_schema": json_schema})


def run_corpus_entry(args, entry, counts, failures):
    label = f"schema {entry['name']}"
    status, parsed, raw = post(args.base_url, "/v1/chat/completions",
                               corpus_request(args.model, entry, args.max_tokens, args.n, args.seed))
    counts.add(requests=1)
    if "refused" in entry:
        keyword = entry["refused"]
        message = error_message(parsed)
        failures.check(status == 400, f"{label} (refused {keyword}): status {status} instead of 400: {raw[:300]}")
        failures.check(message is not None, f"{label}: no OpenAI error envelope: {raw[:300]}")
        failures.check(message is not None and keyword in message,
                       f"{label}: the message does not name {keyword!r}: {message!r}")
        return "refused"
    if not failures.check(status == 200 and parsed is not None, f"{label}: status {status}: {raw[:300]}"):
        return "error"
    failures.check(len(parsed["choices"]) == args.n, f"{label}: {len(parsed['choices'])} choices, not {args.n}")
    check_json_answers(label, entry["schema"], parsed, counts, failures)
    return "ok"


def part_corpus(args, failures):
    corpus = load_corpus(args.corpus)[::args.every]
    counts = Counts()
    outcomes = {}
    start = time.monotonic()
    # Concurrent requests share the worker's continuous batch.
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        futures = {pool.submit(run_corpus_entry, args, entry, counts, failures): entry for entry in corpus}
        for future in concurrent.futures.as_completed(futures):
            entry = futures[future]
            try:
                outcomes[entry["name"]] = future.result()
            except Exception as error:  # pylint: disable=broad-except  # a broken answer is a failure, not a crash
                failures.add(f"schema {entry['name']}: {type(error).__name__}: {error}")
    refused = sum(1 for outcome in outcomes.values() if outcome == "refused")
    print(f"corpus: {len(corpus)} schemas ({refused} refused as expected), {counts}, "
          f"{time.monotonic() - start:.1f} s", flush=True)
    failures.check(len(outcomes) == len(corpus), "not every schema got an answer")
    failures.check(counts.finished > 0, "no answer finished: nothing was validated")
    # A random model stops when the grammar lets it: most short schemas finish within max_tokens.
    failures.check(counts.finished * 4 >= counts.answers,
                   f"only {counts.finished} of {counts.answers} answers finished")
    failures.check(counts.validated == counts.finished, "a finished answer did not validate")
    if not failures.messages:
        print("ok corpus", flush=True)


# --- part "features" -----------------------------------------------------------------------------------------

# Schemas whose greedy answers must be the same streamed and not.
GREEDY_SCHEMAS = ("plain_integer", "color_enum", "nullable_string", "openai_sentiment", "openai_calendar_event",
                  "fn_get_weather", "fn_set_thermostat", "nested_person_address", "ref_binary_tree",
                  "format_date_time", "format_uuid", "pattern_semver", "int_http_status", "num_probability",
                  "anyof_shapes", "oneof_discriminated_payment", "map_string_to_integer", "tuple_then_rest",
                  "keys_needing_escapes")

# vLLM regexes and the same language for Python's re (ASCII classes, as ECMAScript's).
REGEXES = (r"\d{3}-\d{4}", r"(yes|no|maybe)", r"[A-Z][a-z]{1,6}( [A-Z][a-z]{1,6}){0,2}",
           r"[a-z]{2,8}@[a-z]{2,6}\.(com|org|net)", r"#[0-9a-fA-F]{6}", r"(19|20)\d\d-(0[1-9]|1[0-2])-[0-3]\d",
           r"-?(0|[1-9]\d{0,5})(\.\d{1,3})?", r"[^\n\"]{0,12}!")

CHOICES = ("red", "green", "blue", "dark blue", "light green", "")

# A finite GBNF grammar and its language as a Python regex.
GREETING_GRAMMAR = r'''
# a greeting, a name of one to three letters, and an exclamation mark
root     ::= greeting " " name "!"
greeting ::= "hello" | "hi" | "good morning"
name     ::= [a-z] [a-z]? [a-z]?
'''
GREETING_RE = re.compile(r"(hello|hi|good morning) [a-z]{1,3}!", re.ASCII)

# A recursive grammar: compact nested arrays of integers without leading zeros. Checked by hand below.
NESTED_GRAMMAR = r'''
root  ::= array
array ::= "[" (value ("," value){0,3})? "]"
value ::= [1-9] [0-9]{0,2} | array
'''


def is_nested_array(text):
    """Whether `text` is in NESTED_GRAMMAR's language: a hand-written recursive-descent check."""
    position = 0

    def array(depth):
        nonlocal position
        if depth > 64 or position >= len(text) or text[position] != "[":
            return False
        position += 1
        if position < len(text) and text[position] == "]":
            position += 1
            return True
        for count in range(4):
            if count > 0:
                if position < len(text) and text[position] == "]":
                    break
                if position >= len(text) or text[position] != ",":
                    return False
                position += 1
            if position < len(text) and text[position] == "[":
                if not array(depth + 1):
                    return False
            else:
                match = re.compile(r"[1-9][0-9]{0,2}").match(text, position)
                if not match:
                    return False
                position = match.end()
        if position >= len(text) or text[position] != "]":
            return False
        position += 1
        return True

    return array(0) and position == len(text)


def expect_ok(label, status, parsed, raw, failures):
    return failures.check(status == 200 and parsed is not None, f"{label}: status {status}: {raw[:300]}")


def check_greedy_stream(args, corpus, failures):
    """Greedy answers of a schema are the same whole and streamed (and validate when finished)."""
    counts = Counts()
    by_name = {entry["name"]: entry for entry in corpus}

    def one(name):
        entry = by_name[name]
        body = corpus_request(args.model, entry, args.max_tokens, 1, args.seed)
        body["temperature"] = 0
        status, parsed, raw = post(args.base_url, "/v1/chat/completions", body)
        if not expect_ok(f"greedy {name}", status, parsed, raw, failures):
            return
        counts.add(requests=1)
        check_json_answers(f"greedy {name}", entry["schema"], parsed, counts, failures)
        whole_text, whole_finish = answers(parsed)[0]
        stream_status, texts, finishes, error = post_stream(args.base_url, "/v1/chat/completions", body)
        failures.check(stream_status == 200 and error is None, f"streamed {name}: {stream_status} {error}")
        failures.check(texts.get(0) == whole_text,
                       f"greedy {name}: streamed {texts.get(0)!r} but not streamed {whole_text!r}")
        failures.check(finishes.get(0) == whole_finish,
                       f"greedy {name}: streamed finish {finishes.get(0)!r}, not streamed {whole_finish!r}")

    def sampled(name):
        # Seeded sampling gives the same three answers streamed and not, each index reassembled on its own.
        body = corpus_request(args.model, by_name[name], args.max_tokens, 3, args.seed)
        status, parsed, raw = post(args.base_url, "/v1/chat/completions", body)
        if not expect_ok(f"sampled {name}", status, parsed, raw, failures):
            return
        check_json_answers(f"sampled {name}", by_name[name]["schema"], parsed, counts, failures)
        stream_status, texts, finishes, error = post_stream(args.base_url, "/v1/chat/completions", body)
        failures.check(stream_status == 200 and error is None, f"streamed {name}: {stream_status} {error}")
        streamed = [(texts.get(index), finishes.get(index)) for index in range(3)]
        failures.check(streamed == answers(parsed), f"sampled {name}: streamed {streamed}, not {answers(parsed)}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        futures = [pool.submit(one, name) for name in GREEDY_SCHEMAS[::args.every]]
        futures += [pool.submit(sampled, name) for name in GREEDY_SCHEMAS[::5 * args.every]]
        for future in futures:
            future.result()
    print(f"greedy (and some seeded), streamed and not: {len(GREEDY_SCHEMAS[::args.every])} schemas, {counts}",
          flush=True)
    failures.check(counts.finished > 0, "no greedy answer finished")


def check_regexes(args, failures):
    counts = Counts()

    def one(pattern):
        body = chat(args.model, "Say something.", 40, n=4, temperature=1, seed=args.seed,
                    structured_outputs={"regex": pattern})
        status, parsed, raw = post(args.base_url, "/v1/chat/completions", body)
        if not expect_ok(f"regex {pattern}", status, parsed, raw, failures):
            return
        counts.add(requests=1)
        oracle = re.compile(pattern, re.ASCII)
        for text, finish in answers(parsed):
            counts.add(answers=1)
            if finish != "stop":
                continue
            counts.add(finished=1)
            if failures.check(oracle.fullmatch(text) is not None, f"regex {pattern}: {text!r} does not match"):
                counts.add(validated=1)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for future in [pool.submit(one, pattern) for pattern in REGEXES]:
            future.result()
    print(f"structured_outputs.regex: {len(REGEXES)} regexes, {counts}", flush=True)
    # Every prompt of a list gets the constraint (completions; n answers per prompt), streamed or not.
    pattern = r"[0-9]{2,5}|[a-f]{3}"
    body = {"model": args.model, "prompt": ["One", "Two", "Three"], "n": 2, "max_tokens": 16, "temperature": 1,
            "seed": args.seed, "guided_regex": pattern}
    status, parsed, raw = post(args.base_url, "/v1/completions", body)
    if expect_ok("completions guided_regex with 3 prompts", status, parsed, raw, failures):
        got = answers(parsed)
        failures.check(len(got) == 6, f"completions guided_regex: {len(got)} choices, not 6")
        for text, finish in got:
            # Every answer is at most five tokens of a bounded regex: all finish.
            failures.check(finish == "stop" and re.fullmatch(pattern, text, re.ASCII) is not None,
                           f"completions guided_regex: {text!r} ({finish})")
        stream_status, texts, finishes, error = post_stream(args.base_url, "/v1/completions", body)
        failures.check(stream_status == 200 and error is None, f"streamed completions regex: {stream_status} {error}")
        streamed = [(texts.get(index), finishes.get(index)) for index in range(6)]
        failures.check(streamed == got, f"completions guided_regex: streamed {streamed}, not {got}")
    failures.check(counts.finished > 0, "no regex answer finished")


def check_choice(args, failures):
    # Every choice is at most a dozen bytes: all eight answers must end by choosing one.
    body = chat(args.model, "Pick a colour.", 32, n=8, temperature=1, seed=args.seed, guided_choice=list(CHOICES))
    status, parsed, raw = post(args.base_url, "/v1/chat/completions", body)
    if not expect_ok("guided_choice", status, parsed, raw, failures):
        return
    got = answers(parsed)
    for text, finish in got:
        failures.check(finish == "stop", f"guided_choice: finish_reason {finish!r} for {text!r}")
        failures.check(text in CHOICES, f"guided_choice: {text!r} is not one of {CHOICES}")
    print(f"guided_choice: {sorted(text for text, _ in got)}", flush=True)
    # The same with the completions API and structured_outputs.choice.
    body = {"model": args.model, "prompt": "My favourite colour is", "max_tokens": 32, "n": 4, "temperature": 1,
            "seed": args.seed, "structured_outputs": {"choice": list(CHOICES)}}
    status, parsed, raw = post(args.base_url, "/v1/completions", body)
    if expect_ok("completions structured_outputs.choice", status, parsed, raw, failures):
        for text, finish in answers(parsed):
            failures.check(finish == "stop" and text in CHOICES, f"completions choice: {text!r} ({finish})")


def check_grammars(args, failures):
    # The greeting grammar is finite and short: every answer ends.
    body = chat(args.model, "Greet someone.", 32, n=6, temperature=1, seed=args.seed,
                structured_outputs={"grammar": GREETING_GRAMMAR})
    status, parsed, raw = post(args.base_url, "/v1/chat/completions", body)
    if expect_ok("grammar greeting", status, parsed, raw, failures):
        for text, finish in answers(parsed):
            failures.check(finish == "stop", f"grammar greeting: finish_reason {finish!r} for {text!r}")
            failures.check(GREETING_RE.fullmatch(text) is not None, f"grammar greeting: {text!r} is not a greeting")
        print(f"grammar greeting: {[text for text, _ in answers(parsed)]}", flush=True)
    # The nested grammar (as guided_grammar) may run to max_tokens; what finishes is checked by hand.
    counts = Counts()
    body = chat(args.model, "Some arrays.", 48, n=8, temperature=1, seed=args.seed, guided_grammar=NESTED_GRAMMAR)
    status, parsed, raw = post(args.base_url, "/v1/chat/completions", body)
    if expect_ok("grammar nested", status, parsed, raw, failures):
        counts.add(requests=1)
        for text, finish in answers(parsed):
            counts.add(answers=1)
            if finish != "stop":
                continue
            counts.add(finished=1)
            if failures.check(is_nested_array(text), f"grammar nested: {text!r} is not in the language"):
                counts.add(validated=1)
        print(f"guided_grammar nested arrays: {counts}", flush=True)
        failures.check(counts.finished > 0, "no nested-array answer finished")


def check_other_json_forms(args, corpus, failures):
    """structured_outputs.json, guided_json as a string, json_object in both APIs; completions json_schema."""
    counts = Counts()
    by_name = {entry["name"]: entry for entry in corpus}
    any_object = {"type": "object"}
    requests = []
    for name in ("fn_get_weather", "openai_sentiment"):
        schema = by_name[name]["schema"]
        requests.append((f"structured_outputs.json {name}", "/v1/chat/completions", schema,
                         chat(args.model, "JSON please.", args.max_tokens, n=2, temperature=1, seed=args.seed,
                              structured_outputs={"json": schema})))
        requests.append((f"guided_json string {name}", "/v1/chat/completions", schema,
                         chat(args.model, "JSON please.", args.max_tokens, n=2, temperature=1, seed=args.seed,
                              guided_json=json.dumps(schema))))
    requests.append(("structured_outputs.json_object", "/v1/chat/completions", any_object,
                     chat(args.model, "JSON please.", args.max_tokens, n=2, temperature=1, seed=args.seed,
                          structured_outputs={"json_object": True})))
    requests.append(("chat response_format json_object", "/v1/chat/completions", any_object,
                     chat(args.model, "JSON please.", args.max_tokens, n=2, temperature=1, seed=args.seed,
                          response_format={"type": "json_object"})))
    requests.append(("completions response_format json_object", "/v1/completions", any_object,
                     {"model": args.model, "prompt": "JSON:", "max_tokens": args.max_tokens, "n": 2,
                      "temperature": 1, "seed": args.seed, "response_format": {"type": "json_object"}}))
    for name in ("plain_integer", "color_enum", "openai_calendar_event", "fn_get_weather", "format_date",
                 "ref_linked_list_definitions", "pattern_us_zip", "array_exact_length"):
        entry = by_name[name]
        json_schema = {"name": name, "schema": entry["schema"], "strict": bool(entry.get("strict", False))}
        requests.append((f"completions response_format {name}", "/v1/completions", entry["schema"],
                         {"model": args.model, "prompt": f"The {name.replace('_', ' ')} as JSON:",
                          "max_tokens": args.max_tokens, "n": 2, "temperature": 1, "seed": args.seed,
                          "response_format": {"type": "json_schema", "json_schema": json_schema}}))

    def one(label, path, schema, body):
        status, parsed, raw = post(args.base_url, path, body)
        if expect_ok(label, status, parsed, raw, failures):
            counts.add(requests=1)
            check_json_answers(label, schema, parsed, counts, failures)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for future in [pool.submit(one, *request) for request in requests]:
            future.result()
    print(f"other JSON forms and /v1/completions: {counts}", flush=True)
    failures.check(counts.finished > 0, "no answer of the other JSON forms finished")


def part_features(args, failures):
    corpus = load_corpus(args.corpus)
    start = time.monotonic()
    for name, check in (("greedy and streamed", lambda: check_greedy_stream(args, corpus, failures)),
                        ("regex", lambda: check_regexes(args, failures)),
                        ("choice", lambda: check_choice(args, failures)),
                        ("grammar", lambda: check_grammars(args, failures)),
                        ("other JSON forms", lambda: check_other_json_forms(args, corpus, failures))):
        before = len(failures.messages)
        check()
        if len(failures.messages) == before:
            print(f"ok {name}", flush=True)
    print(f"features: {time.monotonic() - start:.1f} s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--base-url", required=True, help="the gateway, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True)
    parser.add_argument("--part", choices=("corpus", "features"), required=True)
    parser.add_argument("--corpus", default=CORPUS, help="the schema corpus (default: tests/grammar's)")
    parser.add_argument("--max-tokens", type=int, default=150)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--every", type=int, default=1,
                        help="only every Nth corpus schema (sanitizer builds, whose workers are many times slower)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at once")
    args = parser.parse_args()
    args.base_url = args.base_url.rstrip("/")
    if args.base_url.endswith("/v1"):
        args.base_url = args.base_url[:-len("/v1")]
    failures = Failures()
    if args.part == "corpus":
        part_corpus(args, failures)
    else:
        part_features(args, failures)
    if failures.messages:
        print(f"{len(failures.messages)} checks failed", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
