#!/usr/bin/env bash
# Runs every fuzzer of tests/fuzz (built with --config=fuzz) one after the
# other on one core (in-process: no -jobs/-workers, which would fork), each from its seed corpus, and prints libFuzzer's last
# status line per target. New inputs go to a work directory, never into the
# checked-in corpus.
#
#   tests/fuzz/run_fuzzers.sh [RUNS] [MAX_SECONDS] [FUZZER...]
#
# RUNS defaults to 10000000, MAX_SECONDS (per target) to 1200. Crashes are
# written to $WORK/<fuzzer>/crash-*; logs to $WORK/<fuzzer>.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-10000000}"
max_seconds="${2:-1200}"
shift $(( $# > 2 ? 2 : $# ))
fuzzers=("$@")
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  fuzzers=(commit_log_fuzzer cursor_fuzzer db_files_fuzzer blob_fuzzer
           plan_position_fuzzer blob_index_fuzzer ckpt_fuzzer)
fi
work="${WORK:-/tmp/jobgraph_fuzz}"
root="${PWD}"
bin="$(./tools/bazel info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz"
for fuzzer in "${fuzzers[@]}"; do
  mkdir -p "${work}/${fuzzer}"
  start=$(date +%s)
  status=0
  (cd "${work}/${fuzzer}" &&
    "${bin}/${fuzzer}" -runs="${runs}" -max_total_time="${max_seconds}" \
      -print_final_stats=1 \
      "${work}/${fuzzer}" "${root}/tests/fuzz/corpus/${fuzzer}") \
    >"${work}/${fuzzer}.log" 2>&1 || status=$?
  end=$(date +%s)
  last=$(grep -E '^#[0-9]+' "${work}/${fuzzer}.log" | tail -n 1 || true)
  done_line=$(grep -E '^Done [0-9]+ runs' "${work}/${fuzzer}.log" || true)
  echo "${fuzzer}: exit ${status}, $((end - start)) s; ${done_line}; ${last}"
done
