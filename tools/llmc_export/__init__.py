"""llmc's model exporter: Hugging Face Llama-family checkpoints (or random weights) to llmc model packages.

A package is a folder with model.pt (TorchScript), tokenizer.json and llmc-model.json (the manifest);
see docs/model-package.md.
"""
