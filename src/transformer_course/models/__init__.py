"""The networks, one module per idea, in the order the chapters build them: recurrent cells and layers
(``rnn``, ``lstm``, ``gru``), the encoder-decoder (``seq2seq``), additive attention (``bahdanau``),
scaled dot-product, multi-head and packed attention (``attention``, ``multihead``, ``packed_attention``),
positional encodings (``positional``), the Transformer (``transformer_layers``, ``transformer``,
``transformer_torch``, ``incremental``) and the language models of chapter 10 (``language_model``,
``lm_baselines``, ``lm_loss``, ``masked_lm``).

The lowest layer but data: a model imports only other models, ``data`` and the argument checks, never
training, decoding or evaluation (tests/test_package_structure.py holds it to that).
"""
