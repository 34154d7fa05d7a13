"""The chapters' experiments, each a model, its data and its training in one call: the toy tasks of
chapters 3 and 4 (``toy_experiments``), English-Spanish translation with the model cache
(``translation``), and captioning images of digits (``captioning``, ``patch_captioner``)."""
