"""Benchmark (not a test): the memory and time of plain attention against tiled attention, by length (chapter 11).

    .venv/bin/python tests/benchmarks/attention_memory.py --lengths 256 1024 4096 16384 [--out FILE.json]

One head, d = 64, float32, one thread, causal and not. Each (method, length) runs in a fresh process: the queries,
keys and values are made, the method runs once on a short prefix to warm up, then the process's peak resident memory is read
(``ru_maxrss``) before and after one timed call. The difference is what the call needed beyond its inputs: for
plain attention the (n, n) scores and their softmax, for tiled attention (``models.tiled_attention``) one
(block, block) tile and the running sums. Plain attention here is the course's chapter 5 formula written out
(q k^T / sqrt(d), a mask, softmax, times v), not PyTorch's fused kernel, whose memory depends on the kernel it picks.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ONE_RUN = """
import json, math, resource, sys, time
import torch
torch.set_num_threads(1)
from transformer_course.models.tiled_attention import tiled_attention

method, n, block, causal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "causal"
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(n, 64, generator=g) for _ in range(3))  # (n, d): one head


def plain(q, k, v):
    t = q.shape[0]
    scores = (q @ k.T) / math.sqrt(64)  # (t, t): the matrix tiling avoids
    if causal:
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def tiled(q, k, v):
    return tiled_attention(q, k, v, causal=causal, block=block)


run = plain if method == "plain" else tiled
run(q[:256], k[:256], v[:256])  # a warm-up on a short prefix: the libraries' first-call set-up is not counted
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
start = time.perf_counter()
out = run(q, k, v)
seconds = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"method": method, "n": n, "block": block, "causal": causal, "seconds": seconds,
                  "extra_mib": max(0, after - before) / 1024, "checksum": float(out.sum())}))
"""


def one(method: str, n: int, block: int, causal: bool) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", ONE_RUN, method, str(n), str(block), "causal" if causal else "full"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--out", type=Path, help="write the runs to this JSON file")
    args = parser.parse_args()
    runs = []
    print(" causal       n   plain MiB   tiled MiB   ratio   plain s   tiled s")
    for causal in (False, True):
        for n in args.lengths:
            plain, tiled = one("plain", n, args.block, causal), one("tiled", n, args.block, causal)
            assert abs(plain["checksum"] - tiled["checksum"]) < 1e-3 * n, (plain, tiled)  # the same outputs
            runs += [plain, tiled]
            ratio = plain["extra_mib"] / max(tiled["extra_mib"], 1 / 1024)
            print(
                f" {str(causal):6s} {n:7d} {plain['extra_mib']:11.1f} {tiled['extra_mib']:11.1f} {ratio:7.0f}"
                f" {plain['seconds']:9.3f} {tiled['seconds']:9.3f}"
            )
    if args.out:
        command = "python tests/benchmarks/attention_memory.py --lengths " + " ".join(map(str, args.lengths))
        record = {
            "command": f"{command} --block {args.block} --out {args.out}",
            "lengths": args.lengths,
            "block": args.block,
            "threads": 1,
            "runs": runs,
        }
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
