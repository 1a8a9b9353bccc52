#!/usr/bin/env bash
# Runs every fuzzer of tests/fuzz (built with --config=fuzz) one after the
# other on one core (in-process: no -jobs/-workers, which would fork), each
# from its seed corpus, and prints libFuzzer's last status line per target.
# New inputs go to a work directory, never into the checked-in corpus.
#
#   tests/fuzz/run_fuzzers.sh [RUNS] [MAX_SECONDS] [FUZZER...]
#
# RUNS defaults to 10000000, MAX_SECONDS (per target) to 1200. The corpus a
# target grows is $WORK/<fuzzer>/ (WORK defaults to /tmp/jobgraph_fuzz); its
# findings (crash-*, leak-*, timeout-*, oom-*) go to $WORK/<fuzzer>.artifacts/
# and its log to $WORK/<fuzzer>.log.
#
# A target fails when libFuzzer exits with a non-zero status or writes a
# finding in this run. The script runs every target anyway, then names the
# ones that failed and exits with status 1; 0 when none did.
set -euo pipefail
export LC_ALL=C  # one collation for sort and comm
cd "$(dirname "$0")/../.."
runs="${1:-10000000}"
max_seconds="${2:-1200}"
shift $(( $# > 2 ? 2 : $# ))
fuzzers=("$@")
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  fuzzers=(commit_log_fuzzer commit_log_append_fuzzer cursor_fuzzer
           db_files_fuzzer blob_fuzzer plan_position_fuzzer blob_index_fuzzer
           ckpt_fuzzer)
fi
work="${WORK:-/tmp/jobgraph_fuzz}"
root="${PWD}"
bin="$(./tools/bazel info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz"

# The findings libFuzzer has written into directory $1, one per line.
findings() {
  find "$1" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) \
    -print | sort
}

failed=()
for fuzzer in "${fuzzers[@]}"; do
  artifacts="${work}/${fuzzer}.artifacts"
  mkdir -p "${work}/${fuzzer}" "${artifacts}"
  # Findings of earlier runs are not this run's.
  old_findings="$(findings "${artifacts}")"
  start=$(date +%s)
  status=0
  (cd "${artifacts}" &&
    "${bin}/${fuzzer}" -runs="${runs}" -max_total_time="${max_seconds}" \
      -print_final_stats=1 -artifact_prefix="${artifacts}/" \
      "${work}/${fuzzer}" "${root}/tests/fuzz/corpus/${fuzzer}") \
    >"${work}/${fuzzer}.log" 2>&1 || status=$?
  end=$(date +%s)
  new_findings="$(comm -13 <(echo "${old_findings}") \
                           <(findings "${artifacts}") | sed '/^$/d')"
  count=0
  if [[ -n "${new_findings}" ]]; then
    count=$(wc -l <<<"${new_findings}")
  fi
  last=$(grep -E '^#[0-9]+' "${work}/${fuzzer}.log" | tail -n 1 || true)
  done_line=$(grep -E '^Done [0-9]+ runs' "${work}/${fuzzer}.log" || true)
  verdict="ok"
  if [[ ${status} -ne 0 || ${count} -ne 0 ]]; then
    verdict="FAILED"
    failed+=("${fuzzer}")
  fi
  echo "${fuzzer}: ${verdict}: exit ${status}, ${count} findings, $((end - start)) s; ${done_line}; ${last}"
  if [[ -n "${new_findings}" ]]; then
    sed 's/^/  /' <<<"${new_findings}"
  fi
  if [[ ${status} -ne 0 ]]; then
    echo "  log: ${work}/${fuzzer}.log"
  fi
done

if [[ ${#failed[@]} -ne 0 ]]; then
  echo "run_fuzzers: ${#failed[@]} of ${#fuzzers[@]} targets failed: ${failed[*]}"
  exit 1
fi
echo "run_fuzzers: all ${#fuzzers[@]} targets passed"
