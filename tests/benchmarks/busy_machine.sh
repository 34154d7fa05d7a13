#!/usr/bin/env bash
# Usage: bash tests/benchmarks/busy_machine.sh   (OUT=folder for the logs; BUSY_CACHE=an empty cache folder)
# Issue 51 item 5: chapters 2, 4 and 8b under strict nbval beside two busy loops, from an empty model cache, then
# again from the cache that run left. As `make test` runs them: the trainers first (tests/test_trained_models.py),
# two workers, the course's schedule.
cd "$(dirname "$0")/../.."
export TRANSFORMER_COURSE_CACHE="${BUSY_CACHE:-/tmp/busy-machine-cache}" OMP_NUM_THREADS=1 NOTEBOOK_THREADS=1 TRANSFORMER_COURSE_REPRODUCIBLE=1 TQDM_DISABLE=1 OMP_WAIT_POLICY=PASSIVE
rm -rf "${BUSY_CACHE:-/tmp/busy-machine-cache}"
: > "${OUT:-/tmp}"/busy_summary.log
python3 -c "while True: pass" & B1=$!
python3 -c "while True: pass" & B2=$!
for pass in 1 2; do
  start=$(date +%s)
  .venv/bin/python -m pytest -n 2 --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg -p tests.schedule \
    --dist loadscope --no-loadscope-reorder -p no:cacheprovider --durations=10 \
    tests/test_trained_models.py solutions/02_lstm.ipynb solutions/04_bahdanau_attention.ipynb \
    solutions/08_transformer_vs_gru.ipynb > "${OUT:-/tmp}"/busy_pass$pass.log 2>&1
  rc=$?
  echo "pass $pass: rc=$rc, $(( $(date +%s) - start )) s, load average $(cut -d' ' -f1-3 /proc/loadavg), $(tail -1 "${OUT:-/tmp}"/busy_pass$pass.log)" >> "${OUT:-/tmp}"/busy_summary.log
done
kill $B1 $B2
ls -la "${BUSY_CACHE:-/tmp/busy-machine-cache}" >> "${OUT:-/tmp}"/busy_summary.log
