"""Training: the loop (``loop.fit``), exact checkpoints, the on-disk model cache, the translation models'
configurations by name (``configs``) and their typed form (``kinds``), and the command lines
(``train``, ``lm_train``, ``mlm_train``; ``options`` parses the first).

Training imports the models, data, decoding and evaluation it trains and scores; nothing below it
imports training.
"""
