"""The course's architecture diagrams, drawn with code from the models' own sizes, so they cannot drift from them.

Every function returns a ``Diagram``: its SVG (shown inline by a notebook cell that ends with the call), alt text
built from the same arguments, and ``parts``, a count of what was drawn. The SVG is the same, byte for byte, on
every run. Counted elements carry ids (``encoder-layer-3``, ``head-8``, ...) that tests read back from the SVG.

    from transformer_course.diagrams import transformer_stack
    transformer_stack(typed(CONFIGS["transformer-cpu"]))
"""

from ._render import Diagram
from .attention import attention_matrix_form, attention_steps, mask_diagram, qkv_projections
from .decoding import beam_tree, kv_cache
from .families import model_families
from .layers import layer_kinds, pre_post_norm, transformer_layer
from .multihead import multi_head
from .positional import pe_layouts, positional_entry
from .recurrent import gru_cell, lstm_cell, rnn_cell, rnn_unrolled
from .scale import query_key_value_heads, rotary_pairs, sliding_window_reach, tiled_attention_tiles
from .sequence import bahdanau_step, encoder_decoder, teacher_forcing
from .transformer import cross_attention, transformer_stack

# The phone's layouts drawn apart from their diagrams (the others draw both): importing registers them.
from . import (  # noqa: F401  isort: skip
    _narrow_attention,
    _narrow_decoding,
    _narrow_families,
    _narrow_grids,
    _narrow_positional,
    _narrow_recurrent,
    _narrow_scale,
    _narrow_sequence,
    _narrow_transformer,
)

__all__ = [
    "Diagram",
    "attention_matrix_form",
    "attention_steps",
    "bahdanau_step",
    "beam_tree",
    "cross_attention",
    "encoder_decoder",
    "gru_cell",
    "kv_cache",
    "layer_kinds",
    "lstm_cell",
    "mask_diagram",
    "model_families",
    "multi_head",
    "pe_layouts",
    "positional_entry",
    "pre_post_norm",
    "qkv_projections",
    "query_key_value_heads",
    "rnn_cell",
    "rnn_unrolled",
    "rotary_pairs",
    "sliding_window_reach",
    "teacher_forcing",
    "tiled_attention_tiles",
    "transformer_layer",
    "transformer_stack",
]
