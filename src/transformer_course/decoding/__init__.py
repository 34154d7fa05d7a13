"""Turning a trained model into text: greedy and beam search over the Transformer's key/value cache
(``search``, chapter 9) and sampling from a language model (``sampling``, chapter 10)."""
