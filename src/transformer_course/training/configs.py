"""The translation models' configurations: model sizes, batches and training budgets, by name.

Kept apart from the code that uses them: a model's cache key holds its own configuration and the
source of the code that trains it, so adding or changing one configuration does not retrain the
others. "-cpu" configurations fit a notebook on 2 cores; "-gpu" ones are larger.
"""

from __future__ import annotations

__all__ = ["CONFIGS", "COPY_EXPERIMENT", "DATE_EXPERIMENT", "STEPS_IN_BUDGET"]

CONFIGS: dict[str, dict] = {
    # Every CPU model trains for the same 5 minutes (evaluation excluded) on batches of up to 1,000 tokens, with
    # a warm-up then inverse-square-root schedule: the chapters compare what each architecture learns in the
    # same time on the same machine. A time budget, not a number of steps, also bounds the cost of a notebook
    # on a slower machine (it trains fewer steps there). Under test, the steps of STEPS_IN_BUDGET replace it.
    # Chosen on validation BLEU after 5 minutes on 2 cores, from twelve trials (book/instructor/models.md): a peak
    # of 8e-3 (from 3e-3) and 600-token batches (from 1,000), which buy more and larger updates in the same time.
    "seq2seq-cpu": {
        "model": "seq2seq",
        "d_emb": 256,
        "d_hidden": 256,
        "max_tokens": 600,
        "peak_lr": 8e-3,
        "warmup": 80,
        "seconds": 300,
    },
    # Chosen for BLEU after 5 minutes on 2 cores: embeddings, attention and readout of 128 make a step about a
    # quarter cheaper than at 256, and 700-token batches at a peak of 8e-3 give more updates in the same time. A
    # sweep of twelve trials on validation BLEU found none better by more than seeds differ (book/instructor/models.md).
    "bahdanau-cpu": {
        "model": "bahdanau",
        "d_emb": 128,
        "d_hidden": 256,
        "d_att": 128,
        "d_readout": 128,
        "tie": True,
        "max_tokens": 700,
        "peak_lr": 8e-3,
        "warmup": 70,
        "seconds": 300,
    },
    # Tuned for validation BLEU after 5 minutes on 2 cores (12 trials, the sweep is in book/instructor/models.md):
    # without dropout (five minutes see each training pair less than once, so there is nothing to regularise yet,
    # and a step without dropout's masks is cheaper), narrower (d_model 192 instead of 256) and on batches of 600
    # tokens: more, cheaper updates.
    "transformer-cpu": {
        "model": "transformer",
        "d_model": 192,
        "n_heads": 4,
        "n_encoder_layers": 2,
        "n_decoder_layers": 2,
        "d_ff": 768,
        "dropout": 0.0,
        "norm_first": True,
        "tie_embeddings": True,
        "max_tokens": 600,
        "peak_lr": 2e-3,
        "warmup": 150,
        "seconds": 300,
    },
    # The reference models of chapters 8 and 9, trained once for 60 minutes on 2 cores and stored with their weights
    # (src/transformer_course/reference/): an hour sees the training pairs about nine (Transformer) and eleven (GRU)
    # times, so these are wider than the 5-minute ones and the Transformer keeps dropout; each is sized to store in
    # under 25 MB. Chosen by that reasoning, not swept (book/instructor/models.md, "The reference models").
    "transformer-ref": {
        "model": "transformer",
        "d_model": 256,
        "n_heads": 4,
        "n_encoder_layers": 2,
        "n_decoder_layers": 2,
        "d_ff": 1024,
        "dropout": 0.1,
        "norm_first": True,
        "tie_embeddings": True,
        "max_tokens": 1000,
        "peak_lr": 1.5e-3,
        "warmup": 400,
        "seconds": 3600,
    },
    "bahdanau-ref": {
        "model": "bahdanau",
        "d_emb": 256,
        "d_hidden": 256,
        "d_att": 256,
        "d_readout": 256,
        "tie": True,
        "max_tokens": 1000,
        "peak_lr": 3e-3,
        "warmup": 200,
        "seconds": 3600,
    },
    # For one GPU, and the GPU run's budget of about three minutes of training each (transformer_course.gpu), sized by
    # reasoning from the CPU runs, not swept (book/instructor/gpu.md). A GPU step of these small models
    # costs about what launching its kernels costs, whatever the batch, so batches are twelve times the hour-long
    # CPU models' (12,000 tokens), which buys far more tokens per second: three minutes then see the training pairs
    # tens of times, where the CPU hour saw them nine times and still gained with dropout 0.1. So the Transformer
    # is a layer deeper on each side than transformer-ref and keeps more dropout (0.2) against memorising; the peak
    # learning rate is a little higher for the larger batches (pre-norm trains stably there). 7.6 M parameters:
    # int8 weights of under 8 MB come back from the GPU machine and keep the repository small enough to travel.
    "transformer-gpu": {
        "model": "transformer",
        "d_model": 256,
        "n_heads": 4,
        "n_encoder_layers": 3,
        "n_decoder_layers": 3,
        "d_ff": 1024,
        "dropout": 0.2,
        "norm_first": True,
        "tie_embeddings": True,
        "max_tokens": 12000,
        "peak_lr": 2e-3,
        "warmup": 600,
        "seconds": 180,
    },
    # The GRU with attention for the same budget on the same GPU: bahdanau-ref's embeddings, attention and readout,
    # with a recurrent state of 512 (a GRU step of these sizes costs the GPU about the same at 256 or 512, and tens of
    # passes over the data can use the capacity), on the same 12,000-token batches. It has no dropout to set.
    "bahdanau-gpu": {
        "model": "bahdanau",
        "d_emb": 256,
        "d_hidden": 512,
        "d_att": 256,
        "d_readout": 256,
        "tie": True,
        "max_tokens": 12000,
        "peak_lr": 3e-3,
        "warmup": 400,
        "seconds": 180,
    },
    # A few thousand parameters, for quick checks of the trainer (python -m transformer_course.train --data copy).
    "transformer-tiny": {
        "model": "transformer",
        "d_model": 32,
        "n_heads": 2,
        "n_encoder_layers": 1,
        "n_decoder_layers": 1,
        "d_ff": 64,
        "dropout": 0.0,
        "norm_first": True,
        "tie_embeddings": True,
        "max_tokens": 400,
        "peak_lr": 3e-3,
        "warmup": 20,
        "steps": 200,
    },
    "bahdanau-tiny": {
        "model": "bahdanau",
        "d_emb": 16,
        "d_hidden": 32,
        "d_att": 16,
        "d_readout": 16,
        "tie": True,
        "max_tokens": 400,
        "peak_lr": 3e-3,
        "warmup": 20,
        "steps": 200,
    },
}

# The steps that five minutes of training buy each CPU configuration on two idle cores, one thread per run: the
# course's stored five-minute runs (runs/NAME-5min-seed*.json, tests/test_budget.py compares). Under test and when
# stored outputs are made, these configurations train these steps instead of their minutes (training.budget).
# bahdanau-bi-cpu was given bahdanau-cpu's steps (chapter 4 compares the two encoders at equal steps).
STEPS_IN_BUDGET: dict[str, int] = {
    "seq2seq-cpu": 3140,
    "bahdanau-cpu": 1950,
    "transformer-cpu": 1920,
    "bahdanau-bi-cpu": 1950,
}

# bahdanau-cpu with Bahdanau's bidirectional encoder (chapter 4): the same sizes and schedule, a GRU each way.
CONFIGS["bahdanau-bi-cpu"] = {**CONFIGS["bahdanau-cpu"], "bidirectional": True}


# Chapters 3 and 4's small experiments (toy_experiments): normalising dates and copying digit strings, trained
# for a number of steps at a constant learning rate, the dates until 99.5 % exact match on the held-out ones.
DATE_EXPERIMENT = {
    "n_train": 20_000,
    "n_test": 1_000,
    "seed": 0,
    "batch_size": 128,
    "d_emb": 32,
    "d_hidden": 128,
    "d_att": 64,
    "lr": 3e-3,
    "steps": 1_200,
    "eval_every": 50,
    "stop_at": 0.995,
}
COPY_EXPERIMENT = {
    "n_train": 20_000,
    "n_test": 1_000,
    "min_len": 4,
    "max_len": 24,
    "seed": 1,
    "batch_size": 128,
    "d_emb": 16,
    "d_hidden": 128,
    "d_att": 64,
    "lr": 3e-3,
    "steps": 400,
}
