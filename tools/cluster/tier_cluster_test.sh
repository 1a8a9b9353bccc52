#!/usr/bin/env bash
# Node-local checkpoint tiers of a job on several hosts, on tools/cluster's
# namespace hosts (as root; skipped, saying why, otherwise): four hosts
# tc1..tc4, one rank each, every host's local tier on its own tmpfs
# ($JG_CLUSTER_STATE/local, wiped when the host is lost), the shared
# directory outside it. tests/mpi_tier_test.cc simulates the first two on
# one host. Every kill is on the job's own log line (its stream), never
# after a sleep; every result is compared with an uninterrupted run's.
#   1. A host lost (killed when rank 0 logs epoch 3): mpirun fails, and the
#      job resumes on the other three, in another order, from the hosts'
#      local tiers alone (databases fetched from another host over MPI),
#      nothing from the shared directory.
#   2. Two partner hosts lost at once: the lost node's databases come from
#      the shared directory (with background saves, --async_checkpoint).
#   3. A host lost during a partner copy (a failpoint crashes its rank before
#      it installs the database it received): the shared directory verifies,
#      and the job resumes on the other three.
#   4. A host lost during a flush to the shared directory (a failpoint
#      crashes its rank after its copy, before the rename): the shared
#      directory verifies, commits no epoch with a database missing, and the
#      job resumes on the other three (with background saves).
set -uo pipefail

runfiles="${TEST_SRCDIR:-$PWD/..}/jobgraph"
# fail, check, cluster_test_start, cluster_test_tmp, cleanup.
# shellcheck source-path=SCRIPTDIR source=test_lib.sh
source "${runfiles}/tools/cluster/test_lib.sh" || exit 1
ckpt="${runfiles}/tools/ckpt"
cluster_test_start -x "${ckpt}"

# A host's name must come from its UTS namespace, and a failpoint only from
# the test (below).
unset JOBGRAPH_HOST_NAME JOBGRAPH_FAILPOINT

# A cluster of its own (state, /24, host names), so that it can run beside
# cluster_test (10.78.x, jg1..) and mpirun_loop_test (10.79.x, ml1..).
export JG_CLUSTER_PREFIX=tc
export JG_CLUSTER_NET="10.80.$(( ($$ % 200) + 20 ))"
cluster_test_tmp jgtier_test

"${cluster}" up 4 || fail "up 4"
local_dir="${JG_CLUSTER_STATE}/local"
hosts=(tc1 tc2 tc3 tc4)

# The uninterrupted run, in one process, and what it prints when resumed
# from epoch E: the same, except from its last epoch, which runs one more
# epoch that reads nothing.
reference=$("${sum_pipeline}" --nodes=4 --session=local --checkpoint_dir="${tmp}/reference" \
  2>/dev/null | grep '^result:')
check "the uninterrupted run's result" "result: epochs=4 totals=145,145,145,145" "${reference}"
last_epoch=$(grep -oE 'epochs=[0-9]+' <<<"${reference}" | grep -oE '[0-9]+')
expected_from() {  # expected_from E ("null": no epoch was resumed)
  if [[ "$1" == "${last_epoch}" ]]; then
    sed -E "s/epochs=[0-9]+/epochs=$((last_epoch + 1))/" <<<"${reference}"
  else
    echo "${reference}"
  fi
}

# fresh_hosts: every host as a new machine: no process, an empty tmpfs.
fresh_hosts() {
  local h
  for h in "${hosts[@]}"; do
    "${cluster}" kill "${h}" >/dev/null || fail "kill ${h}"
    check "${h}'s tmpfs is empty" "" "$("${cluster}" exec "${h}" ls -A "${local_dir}")"
  done
}

# set_job NAME RUN: the job's command line (the array job) for scenario NAME:
# its shared directory $tmp/NAME.shared, a local tier on every host's
# tmpfs, metrics in $tmp/NAME.RUN.metrics.
set_job() {
  job=("${sum_pipeline}" --nodes=4 --checkpoint_dir="${tmp}/$1.shared"
       --local_checkpoint_dir="${local_dir}/tier" --metrics_out="${tmp}/$1.$2.metrics")
}

# run_losing NAME HOST... -- FLAGS...: the first run on tc1..tc4 (one rank
# each), its stderr read as a stream; the moment rank 0 logs the end of
# epoch 3, every HOST is lost at once (cluster.sh kill). Output in
# $tmp/NAME.first.{out,log}; sets status (mpirun's) and logged (the newest
# epoch the run logged).
run_losing() {
  local name=$1
  shift
  local lose=()
  while [[ $1 != -- ]]; do lose+=("$1"); shift; done
  shift
  local fifo="${tmp}/${name}.fifo"
  mkfifo "${fifo}"
  set_job "${name}" first
  # Every rank holds its save of epoch 4 (the 5th, after epoch 0's) until
  # the job is killed: it cannot end before the lost hosts' processes are
  # gone, however long the kill takes.
  JOBGRAPH_FAILPOINT=save.after_snapshot:hold@5 \
    "${cluster}" mpirun tc1,tc2,tc3,tc4 -np 4 "${job[@]}" "$@" \
    >"${tmp}/${name}.first.out" 2>"${fifo}" &
  local mpirun_pid=$!
  local line lost=no kills=() h p
  while IFS= read -r line || [[ -n "${line}" ]]; do
    printf '%s\n' "${line}" >>"${tmp}/${name}.first.log"
    if [[ ${lost} == no && ${line} == *"] epoch 3: "* ]]; then
      for h in "${lose[@]}"; do
        "${cluster}" kill "${h}" >"${tmp}/${name}.kill.${h}" 2>&1 &
        kills+=($!)
      done
      for p in "${kills[@]}"; do wait "${p}" || fail "${name}: cluster.sh kill failed: $(cat "${tmp}/${name}".kill.*)"; done
      lost=yes
    fi
  done <"${fifo}"
  wait "${mpirun_pid}"
  status=$?
  [[ ${lost} == yes ]] || fail "${name}: the job never logged epoch 3 (status ${status}): $(tail -n 5 "${tmp}/${name}.first.log")"
  [[ ${status} -ne 0 ]] || fail "${name}: mpirun ended with status 0 after losing ${lose[*]}"
  echo "ok: ${name}: mpirun ended with status ${status} after losing ${lose[*]} on the line of epoch 3"
  grep -q '^result:' "${tmp}/${name}.first.out" && fail "${name}: the interrupted job printed a result"
  for h in "${lose[@]}"; do
    check "${name}: ${h}'s tmpfs is wiped" "" "$("${cluster}" exec "${h}" ls -A "${local_dir}")"
  done
  logged=$(grep -oE '\] epoch [0-9]+: ' "${tmp}/${name}.first.log" | grep -oE '[0-9]+' | sort -n | tail -n 1)
}

# run_failpoint NAME HOST SPEC FLAGS...: the first run on tc1..tc4 (one rank
# each) with JOBGRAPH_FAILPOINT=SPEC in HOST's rank alone; the failpoint's
# crash must end the job, and HOST's disk is then wiped. Output in
# $tmp/NAME.first.{out,log}. Every rank gets mpirun's whole environment
# (rsh keeps it, so -x would change nothing), hence a wrapper that sets the
# variable on HOST only.
cat >"${tmp}/failpoint_on" <<'EOF'
#!/bin/sh
# failpoint_on HOST SPEC PROGRAM ARGS...: PROGRAM, with JOBGRAPH_FAILPOINT=SPEC
# when it runs on HOST.
host=$1 spec=$2
shift 2
if [ "$(hostname)" = "${host}" ]; then JOBGRAPH_FAILPOINT=${spec}; export JOBGRAPH_FAILPOINT; fi
exec "$@"
EOF
chmod +x "${tmp}/failpoint_on"
run_failpoint() {
  local name=$1 host=$2 spec=$3
  shift 3
  set_job "${name}" first
  "${cluster}" mpirun tc1,tc2,tc3,tc4 -np 4 "${tmp}/failpoint_on" "${host}" "${spec}" \
    "${job[@]}" "$@" >"${tmp}/${name}.first.out" 2>"${tmp}/${name}.first.log"
  status=$?
  [[ ${status} -ne 0 ]] || fail "${name}: mpirun ended with status 0 despite ${spec} on ${host}"
  local point=${spec%%:*}
  grep -q "failpoint ${point}: killing the process with SIGKILL" "${tmp}/${name}.first.log" ||
    fail "${name}: the failpoint did not fire: $(tail -n 20 "${tmp}/${name}.first.log")"
  grep -qE "process rank [0-9]+ with PID [0-9]+ on node ${host} exited on signal 9" "${tmp}/${name}.first.log" ||
    fail "${name}: mpirun does not say that ${host}'s rank was killed: $(tail -n 20 "${tmp}/${name}.first.log")"
  echo "ok: ${name}: ${point} killed ${host}'s rank, and mpirun ended with status ${status}"
  grep -q '^result:' "${tmp}/${name}.first.out" && fail "${name}: the interrupted job printed a result"
  # Its disk goes with it.
  "${cluster}" kill "${host}" >/dev/null || fail "kill ${host}"
}

# relaunch NAME HOSTS FLAGS...: --resume_from_epoch=latest on HOSTS (a comma
# list, one rank each), which must succeed with the exact result. Sets
# metrics (its last metrics line), resumed (its "resumed_from"), tier
# ("resumed_tier") and local_bytes, partner_bytes, shared_bytes
# ("resumed_file_bytes").
relaunch() {
  local name=$1 on=$2
  shift 2
  local n
  n=$(tr ',' '\n' <<<"${on}" | wc -l)
  set_job "${name}" resume
  "${cluster}" mpirun "${on}" -np "${n}" "${job[@]}" "$@" --resume_from_epoch=latest \
    >"${tmp}/${name}.resume.out" 2>"${tmp}/${name}.resume.log" ||
    fail "${name}: the resume on ${on} failed: $(tail -n 20 "${tmp}/${name}.resume.log")"
  echo "ok: ${name}: the resume on ${on} ended with status 0"
  metrics=$(tail -n 1 "${tmp}/${name}.resume.metrics" 2>/dev/null)
  [[ -n "${metrics}" ]] || fail "${name}: the resume wrote no metrics"
  resumed=$(grep -oE '"resumed_from":(null|[0-9]+)' <<<"${metrics}" | cut -d: -f2)
  [[ -n "${resumed}" ]] || fail "${name}: no resumed_from in ${metrics}"
  tier=$(grep -oE '"resumed_tier":"[a-z]+"' <<<"${metrics}" | cut -d'"' -f4)
  local file_bytes
  file_bytes=$(grep -oE '"resumed_file_bytes":\{[^}]*\}' <<<"${metrics}")
  local_bytes=$(grep -oE '"local":[0-9]+' <<<"${file_bytes}" | cut -d: -f2)
  partner_bytes=$(grep -oE '"partner":[0-9]+' <<<"${file_bytes}" | cut -d: -f2)
  shared_bytes=$(grep -oE '"shared":[0-9]+' <<<"${file_bytes}" | cut -d: -f2)
  echo "-- ${name}: resumed from epoch ${resumed}: \"resumed_tier\":\"${tier}\" ${file_bytes}"
  grep -E "\] (node '|resumed from epoch)" "${tmp}/${name}.resume.log" | sed -E 's/^[^]]*\] /   /'
  check "${name}: the resumed job's result (resumed from epoch ${resumed})" \
    "$(expected_from "${resumed}")" "$(grep '^result:' "${tmp}/${name}.resume.out")"
}

verify_shared() {  # verify_shared NAME WHEN
  "${ckpt}" verify "${tmp}/$1.shared" >"${tmp}/$1.verify" 2>&1 ||
    fail "$1: ckpt verify of the shared directory $2: $(tail -n 20 "${tmp}/$1.verify")"
  echo "ok: $1: ckpt verify of the shared directory $2: $(tail -n 1 "${tmp}/$1.verify")"
}

# check_committed_complete NAME WHEN: ckpt list of the shared directory
# lists no committed epoch whose databases are not all there (four nodes,
# each database a directory, no problem noted). An uncommitted epoch, a
# flush's leftover, is not one.
cat >"${tmp}/committed.py" <<'EOF'
import json, os, sys
listing = json.load(open(sys.argv[1]))
nodes = ["trainer_%d" % i for i in range(4)]
committed = [e for e in listing["epochs"] if e["state"] == "committed"]
print(" ".join(str(e["epoch"]) for e in committed))
print(" ".join(str(e["epoch"]) for e in committed
               if sorted(e["nodes"]) != nodes or e["problems"]
               or not all(os.path.isdir(p) for p in e["paths"])))
EOF
check_committed_complete() {
  "${ckpt}" list "${tmp}/$1.shared" --format=json >"${tmp}/$1.list.json" ||
    fail "$1: ckpt list of the shared directory $2 failed"
  python3 "${tmp}/committed.py" "${tmp}/$1.list.json" >"${tmp}/$1.committed" ||
    fail "$1: cannot read ckpt list's output: $(cat "${tmp}/$1.list.json")"
  local committed incomplete
  { read -r committed; read -r incomplete; } <"${tmp}/$1.committed"
  [[ -n "${committed}" ]] || fail "$1: the shared directory commits no epoch $2"
  check "$1: ckpt list $2: committed epochs ${committed}, none with a database missing" "" "${incomplete}"
}

# ---- 1. A host lost: tc2 (node trainer_1; its partner copy is on tc3).
# Flushed at the run's first commit only: the later epochs are in the
# hosts' local tiers and their partners' alone. Epochs of 1.5 s, so that
# the kill lands long before the job's last epoch ends.
echo "-- 1: a host lost"
run_losing s1 tc2 -- --shared_every=100 --epoch_delay_ms=1500
# In this order trainer_0 (its databases on tc1 and the lost tc2) runs on
# tc4 and trainer_1 (on the lost tc2 and tc3) on tc1: both are fetched
# over MPI.
relaunch s1 tc4,tc1,tc3 --shared_every=100
[[ ${resumed} -eq ${logged} || ${resumed} -eq $((logged + 1)) ]] ||
  fail "s1: resumed from epoch ${resumed}, but the lost job had logged epoch ${logged}"
echo "ok: s1: resumed from epoch ${resumed} (the lost job had logged ${logged} as committed)"
check "s1: nothing read from the shared directory" 0 "${shared_bytes}"
check "s1: the tier resumed from" local "${tier}"
[[ ${partner_bytes} -gt 0 && ${local_bytes} -gt 0 ]] ||
  fail "s1: not both fetched from another host and read on the node's own: ${metrics}"
echo "ok: s1: ${partner_bytes} bytes fetched from another host, ${local_bytes} read on the node's own"
grep -q "'s local tier, over MPI" "${tmp}/s1.resume.log" ||
  fail "s1: no database came over MPI: $(grep "\] node '" "${tmp}/s1.resume.log")"
echo "ok: s1: the log names the databases that came over MPI"
verify_shared s1 "after the resume"

# ---- 2. Two partner hosts lost at once: tc2 and tc3 (trainer_1's own
# copy and its partner copy).
echo "-- 2: two partner hosts lost"
fresh_hosts
run_losing s2 tc2 tc3 -- --shared_every=2 --epoch_delay_ms=1500 --async_checkpoint
relaunch s2 tc1,tc4 --shared_every=2 --async_checkpoint
[[ ${shared_bytes} -gt 0 ]] || fail "s2: nothing read from the shared directory: ${metrics}"
echo "ok: s2: ${shared_bytes} bytes read from the shared directory"
grep -q "bytes from the shared directory" "${tmp}/s2.resume.log" ||
  fail "s2: no database came from the shared directory: $(grep "\] node '" "${tmp}/s2.resume.log")"
echo "ok: s2: the log names the databases read from the shared directory"
verify_shared s2 "after the resume"

# ---- 3. tc3 lost while it installs the partner copy of trainer_1 it
# received from tc2 (one database each commit): at the third (@3), epoch
# 2's, so that epochs 0 and 1 are committed before and the resume has
# something to read. Flushed every epoch, so that the shared commit log
# lists several.
echo "-- 3: a host lost during a partner copy"
fresh_hosts
run_failpoint s3 tc3 transfer.before_install:crash@3 --shared_every=1
# ckpt verify checks every epoch the shared commit log lists.
verify_shared s3 "after the crash"
check_committed_complete s3 "after the crash"
relaunch s3 tc4,tc1,tc2 --shared_every=1
verify_shared s3 "after the resume"

# ---- 4. tc2 lost in the middle of its flush of trainer_1 to the shared
# directory (one database each epoch): at the third (@3), epoch 2's, with
# epochs 0 and 1 committed there.
echo "-- 4: a host lost during a flush"
fresh_hosts
run_failpoint s4 tc2 flush.after_copy:crash@3 --shared_every=1 --async_checkpoint
verify_shared s4 "after the crash"
check_committed_complete s4 "after the crash"
"${ckpt}" list "${tmp}/s4.shared" | sed 's/^/   /'
relaunch s4 tc3,tc4,tc1 --shared_every=1 --async_checkpoint
verify_shared s4 "after the resume"
check_committed_complete s4 "after the resume"

echo "PASS"
