"""Attention, from RNNs to Transformers: the course's reference package.

Folders by layer, lowest first; a module imports only from its own layer and the layers below it
(tests/test_package_structure.py reads every import and holds the package to that):

- ``data``: the tasks, tokenizers and batching;
- ``models``: the networks, one module per idea (``models.attention`` for chapter 5, ...);
- ``decoding``: greedy and beam search, sampling;
- ``evaluation``: BLEU, held-out translations, attention maps, figures;
- ``training``: one training loop, the configurations, checkpoints, the model cache, the trainers;
- ``measurement``, ``experiments``, ``reference``, ``diagrams``: what the chapters measure, run, load and draw;
- ``explorer``, ``gpu``: chapter 9's attention explorer, the GPU run;
- ``exercises``: each chapter's exercises (course content);
- ``authoring``: the release tool, the chapter manifest (``chapters.toml``) and the chapter scaffold.

``grading`` stands apart: the grader's machinery, which imports nothing of the course. The root holds the
command lines (``grade``, ``train``, ``lm_train``, ``mlm_train``), the argument checks every layer shares
(``_checks``) and where the course's files are (``repository``).
"""

__version__ = "0.1.0"
