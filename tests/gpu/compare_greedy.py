#!/usr/bin/env python3
"""Asks a running llmc gateway for the greedy answers of hf_baseline.py greedy's prompts (token ids in, token ids
out through vLLM's return_tokens_as_token_ids) and counts how many equal transformers' answers token for token.

  compare_greedy.py --base-url http://127.0.0.1:8100/v1 --model NAME --reference FILE
Exit status 1 when any answer differs.
"""
import argparse
import json
import sys
import urllib.request


def complete(base_url, model, prompt, steps):
    body = {"model": model, "prompt": prompt, "max_tokens": steps, "temperature": 0, "ignore_eos": True,
            "logprobs": 1, "return_tokens_as_token_ids": True}
    request = urllib.request.Request(base_url + "/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        answer = json.load(response)
    tokens = answer["choices"][0]["logprobs"]["tokens"]
    return [int(token.split(":", 1)[1]) for token in tokens]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--reference", required=True)
    args = parser.parse_args()
    with open(args.reference) as f:
        reference = json.load(f)
    same = 0
    for i, case in enumerate(reference):
        ids = complete(args.base_url, args.model, case["prompt"], len(case["greedy"]))
        if ids == case["greedy"]:
            same += 1
        else:
            first = next((k for k, (a, b) in enumerate(zip(ids, case["greedy"])) if a != b), min(len(ids),
                                                                                              len(case["greedy"])))
            print(f"prompt {i}: llmc and transformers part at step {first}: {ids[first:first + 4]} against "
                  f"{case['greedy'][first:first + 4]}")
    print(json.dumps({"greedy_identical": same, "prompts": len(reference), "steps": len(reference[0]["greedy"])}))
    sys.exit(0 if same == len(reference) else 1)


if __name__ == "__main__":
    main()
