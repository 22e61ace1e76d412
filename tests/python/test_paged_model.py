"""The scripted model over the paged KV cache against a full-recompute reference (issue: model package)."""
import unittest

import torch

from paged_scenario import PagedRunner, reference_final_hidden, reference_logits, run_scenario
from llmc_export.config import ModelConfig
from llmc_export.model import CausalLM, random_weights
from llmc_export.ops import paged_attention_reference

TINY = ModelConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_layers=2, num_heads=4, num_kv_heads=2,
                   head_dim=32, max_context_length=2048)


def make_model(config=TINY, seed=3, dtype=torch.float32):
    model = CausalLM(config)
    random_weights(model, seed)
    return model.to(dtype).eval()


class PagedModelTest(unittest.TestCase):
    def check_scenario(self, config, dtype, tolerance):
        model = make_model(config, dtype=dtype)
        model.inv_freq = model.inv_freq.float()
        scripted = torch.jit.script(model)
        compared = []

        def compare(name, tokens, logits):
            expected = reference_logits(model, config, tokens)
            difference = (logits - expected).abs().max().item()
            self.assertLess(difference, tolerance, f"{name} after {len(tokens)} tokens")
            self.assertEqual(int(torch.argmax(logits)), int(torch.argmax(expected)), f"{name} greedy token")
            compared.append(difference)

        with torch.no_grad():
            sequences = run_scenario(scripted, model, config, dtype, steps=32, on_logits=compare)
        self.assertEqual(len(sequences["a"]), 5 + 32)
        self.assertEqual(len(sequences["late"]), 40 + 32 - 7)
        self.assertGreater(len(compared), 120)

    def test_float32_matches_full_recompute(self):
        self.check_scenario(TINY, torch.float32, 1e-4)

    def test_grouped_query_ratios_and_head_sizes(self):
        for heads, kv_heads, head_dim in ((4, 4, 64), (7, 1, 64), (2, 1, 128)):
            with self.subTest(heads=heads, kv_heads=kv_heads, head_dim=head_dim):
                config = ModelConfig(vocab_size=256, hidden_size=heads * head_dim, intermediate_size=128,
                                     num_layers=1, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                                     qkv_bias=False, tie_word_embeddings=False)
                self.check_scenario(config.validate(), torch.float32, 1e-4)

    def test_forward_with_hidden_returns_final_normalized_hidden_rows(self):
        """The embedding entry point: the hidden rows asked for, after the final norm, across chunks, next to
        the same sampling outputs as forward_top_k; a step with no logits rows at all works too."""
        model = make_model()
        model.inv_freq = model.inv_freq.float()
        scripted = torch.jit.script(model)
        prompts = {"a": list(range(7, 30)), "b": list(range(100, 109))}
        captured = []

        def forward(*args):
            # Every row's hidden state, and logits only for the first sequence's last row.
            rows = torch.arange(args[0].shape[0], dtype=torch.long)
            logits_rows = args[7][:1]
            empty = torch.empty(0, dtype=torch.long)
            full, values, ids, hidden = scripted.forward_with_hidden(*args[:7], logits_rows, empty, 4, rows)
            top_values, top_ids = scripted.forward_top_k(*args[:7], logits_rows, empty, 4)[1:]
            self.assertTrue(torch.equal(values, top_values) and torch.equal(ids, top_ids))
            self.assertEqual(tuple(full.shape), (0, TINY.vocab_size))
            none_full, none_values, none_ids, none_hidden = scripted.forward_with_hidden(
                *args[:7], empty, empty, 4, rows)
            self.assertEqual((none_values.shape[0], none_ids.shape[0]), (0, 0))
            self.assertTrue(torch.allclose(none_hidden, hidden, atol=1e-5))
            captured.append(hidden)
            return torch.zeros(len(args[7]), TINY.vocab_size)

        with torch.no_grad():
            runner = PagedRunner(forward, TINY, torch.float32)
            runner.step([("a", prompts["a"][:10]), ("b", prompts["b"])])
            runner.step([("a", prompts["a"][10:])])
        got_a = torch.cat([captured[0][:10], captured[1]])
        got_b = captured[0][10:]
        for name, got in (("a", got_a), ("b", got_b)):
            expected = reference_final_hidden(model, TINY, prompts[name]).float()
            self.assertEqual(got.dtype, torch.float32)
            self.assertLess((got - expected).abs().max().item(), 1e-4, name)

    def test_paged_attention_reference_ignores_other_sequences_blocks(self):
        torch.manual_seed(0)
        key_cache = torch.randn(8, 4, 2, 16)
        value_cache = torch.randn(8, 4, 2, 16)
        query = torch.randn(3, 4, 16)
        block_tables = torch.tensor([[5, 2], [7, 0]], dtype=torch.int32)
        seq_lens = torch.tensor([6, 3], dtype=torch.int32)
        starts = torch.tensor([0, 2, 3], dtype=torch.int32)
        out = paged_attention_reference(query, key_cache, value_cache, block_tables, seq_lens, starts, 0.25)
        scribbled = key_cache.clone()
        scribbled[[1, 3, 4, 6]] = 1e4  # blocks no sequence owns
        again = paged_attention_reference(query, scribbled, value_cache, block_tables, seq_lens, starts, 0.25)
        self.assertTrue(torch.equal(out, again))


if __name__ == "__main__":
    unittest.main()
