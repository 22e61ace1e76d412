#!/usr/bin/env python3
"""Hugging Face transformers on the GPU machine, as the yardstick of scripts/gpu/run.sh (needs transformers,
which Debian does not package, so it runs there only):

  hf_baseline.py checkpoint --out DIR --tokenizer-dir DIR [--seed N]
      a random-weight Qwen2-0.5B-shaped checkpoint in Hugging Face's layout (bfloat16 safetensors), for both
      transformers and tools/export_model.py --checkpoint, so both serve the same weights
  hf_baseline.py generate --checkpoint DIR --input-len 256 --output-len 128 --requests 4 --batches 1,16,64
      output tok/s of `generate`: one request at a time (how FastChat's default worker and a FastAPI seed server
      run models), then statically batched; one JSON line per series
  hf_baseline.py greedy --checkpoint DIR --prompts N --steps 32 --out FILE
      float32 greedy ids for N random prompts, the reference llmc's float32 answers must equal
"""
import argparse
import json
import os
import shutil
import time

import torch

QWEN2_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                 rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, hidden_act="silu")


def make_checkpoint(args):
    import transformers
    torch.manual_seed(args.seed)
    config = transformers.Qwen2Config(**QWEN2_05B)
    model = transformers.Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(args.out, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer_dir, name), os.path.join(args.out, name))


def random_prompts(count, length, seed, vocab=150000):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1000, vocab, (count, length), generator=generator)


def load(checkpoint, dtype):
    import transformers
    try:  # transformers 5 names it dtype; 4 torch_dtype
        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype)
    except TypeError:
        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=dtype)
    if next(model.parameters()).dtype != dtype:
        model = model.to(dtype)
    return model.cuda().eval()


def generate(model, prompts, output_len):
    attention = torch.ones_like(prompts)
    with torch.inference_mode():
        out = model.generate(prompts.cuda(), attention_mask=attention.cuda(), max_new_tokens=output_len,
                             min_new_tokens=output_len, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    return out[:, prompts.shape[1]:].cpu()


def bench(args):
    model = load(args.checkpoint, torch.bfloat16)
    generate(model, random_prompts(1, 16, 99), 4)  # warm-up
    started = time.perf_counter()
    for i in range(args.requests):
        generate(model, random_prompts(1, args.input_len, i), args.output_len)
    seconds = time.perf_counter() - started
    print(json.dumps({"series": "transformers generate, one at a time", "requests": args.requests,
                      "output_tok_s": args.requests * args.output_len / seconds}), flush=True)
    for batch in (int(b) for b in args.batches.split(",")):
        prompts = random_prompts(batch, args.input_len, 1000 + batch)
        started = time.perf_counter()
        generate(model, prompts, args.output_len)
        seconds = time.perf_counter() - started
        print(json.dumps({"series": f"transformers generate, static batch {batch}", "requests": batch,
                          "output_tok_s": batch * args.output_len / seconds}), flush=True)


def greedy(args):
    model = load(args.checkpoint, torch.float32)
    answers = []
    for i in range(args.prompts):
        prompt = random_prompts(1, 8 + 13 * i, 500 + i)
        ids = generate(model, prompt, args.steps)[0].tolist()
        answers.append({"prompt": prompt[0].tolist(), "greedy": ids})
    with open(args.out, "w") as f:
        json.dump(answers, f)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("checkpoint")
    p.add_argument("--out", required=True)
    p.add_argument("--tokenizer-dir", required=True)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("generate")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--requests", type=int, default=4)
    p.add_argument("--batches", default="16,64")
    p = sub.add_parser("greedy")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--out", required=True)
    args = parser.parse_args()
    {"checkpoint": make_checkpoint, "generate": bench, "greedy": greedy}[args.command](args)


if __name__ == "__main__":
    main()
