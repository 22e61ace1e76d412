"""The scripted model over the paged KV cache against a full-recompute reference (issue: model package)."""
import unittest

import torch

from paged_scenario import reference_logits, run_scenario
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
