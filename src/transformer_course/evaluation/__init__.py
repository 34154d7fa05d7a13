"""Scoring what a model produces, and showing it: BLEU from its parts (``bleu``) and through sacrebleu
(``metrics``), translating a held-out set (``translate``), attention maps (``attention_maps``, ``plots``),
what embeddings learnt (``word_embeddings``) and language-model samples (``lm_samples``)."""
