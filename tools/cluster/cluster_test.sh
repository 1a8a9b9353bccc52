#!/usr/bin/env bash
# tools/cluster as a user runs it (as root; skipped, saying why, otherwise):
# three hosts with their own names, node-local tmpfs and addresses; TCP
# between them; an Open MPI job across them; one host lost in the middle of
# a job (every process killed on the job's own logged event, its tmpfs
# wiped), the job ended, and a resume on the two hosts left; then `down`
# leaves nothing behind.
set -uo pipefail

runfiles="${TEST_SRCDIR:-$PWD/..}/jobgraph"
# fail, check, cluster_test_start, cluster_test_tmp, cleanup.
# shellcheck source-path=SCRIPTDIR source=test_lib.sh
source "${runfiles}/tools/cluster/test_lib.sh" || exit 1
# shellcheck disable=SC2119  # no runfiles beyond cluster.sh and sum_pipeline
cluster_test_start

# A /24 of its own, so that concurrent runs do not share one.
export JG_CLUSTER_NET="10.78.$(( ($$ % 200) + 20 ))"
cluster_test_tmp jgcluster_test

"${cluster}" up 3 || fail "up 3"
local_dir="${JG_CLUSTER_STATE}/local"

# Host names.
for i in 1 2 3; do
  check "host name of jg${i}" "jg${i}" "$("${cluster}" exec "jg${i}" hostname)"
done

# Node-local tmpfs: each host sees only its own.
"${cluster}" exec jg1 sh -c "echo one > ${local_dir}/mine" || fail "write on jg1"
check "jg1 reads its file" "one" "$("${cluster}" exec jg1 cat "${local_dir}/mine")"
check "jg2 does not see jg1's file" "" "$("${cluster}" exec jg2 ls "${local_dir}")"
check "the root namespace does not see it" "" "$(ls "${local_dir}")"
check "jg1's tmpfs" "tmpfs" "$("${cluster}" exec jg1 stat -f -c %T "${local_dir}")"

# TCP from jg2 to jg1.
"${cluster}" exec jg1 python3 -c '
import socket, sys
s = socket.socket(); s.bind(("0.0.0.0", 7007)); s.listen()
print("listening", flush=True)
c, a = s.accept(); print(c.recv(100).decode().strip(), a[0], flush=True)' \
  >"${tmp}/listener" &
listener=$!
for _ in $(seq 1 100); do grep -q listening "${tmp}/listener" && break; sleep 0.1; done
"${cluster}" exec jg2 bash -c "echo hello-from-\$(hostname) > /dev/tcp/${JG_CLUSTER_NET}.11/7007" ||
  fail "connect from jg2 to jg1"
wait "${listener}"
check "jg1 heard jg2" "hello-from-jg2 ${JG_CLUSTER_NET}.12" "$(tail -n 1 "${tmp}/listener")"

# One rank on each host.
ranks=$("${cluster}" mpirun jg1,jg2,jg3 -np 3 sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"' | sort)
check "mpirun places a rank on each host" "0 jg1
1 jg2
2 jg3" "${ranks}"

# A job across the three hosts, with its checkpoints in the shared
# directory; jg3 is lost once epoch 2 is committed (its log line).
shared="${tmp}/shared"
mkdir -p "${shared}"
job=(-np 3 "${sum_pipeline}" --nodes=3 --num_records=30 --record_delay_ms=50
     --checkpoint_dir="${shared}")
# Every rank holds its save of epoch 3 (the 4th, after epoch 0's) until the
# job is killed: it cannot end before jg3's processes are gone.
JOBGRAPH_FAILPOINT=save.after_snapshot:hold@4 \
  "${cluster}" mpirun jg1,jg2,jg3 "${job[@]}" >"${tmp}/job.out" 2>"${tmp}/job.log" &
mpirun_pid=$!
for _ in $(seq 1 600); do
  grep -q '] epoch 2: ' "${tmp}/job.log" && break
  kill -0 "${mpirun_pid}" 2>/dev/null || break
  sleep 0.1
done
grep -q '] epoch 2: ' "${tmp}/job.log" || fail "the job never logged epoch 2: $(tail -n 5 "${tmp}/job.log")"
"${cluster}" kill jg3 || fail "kill jg3"
wait "${mpirun_pid}"
status=$?
[[ ${status} -ne 0 ]] || fail "mpirun ended with status 0 after jg3 was lost"
echo "ok: mpirun ended with status ${status} after jg3 was lost"
grep -q "^result:" "${tmp}/job.out" && fail "the interrupted job printed a result"
check "jg3's tmpfs is wiped" "" "$("${cluster}" exec jg3 ls "${local_dir}")"

# The two hosts left resume from latest (three nodes on two ranks).
"${cluster}" mpirun jg1,jg2 -np 2 "${sum_pipeline}" --nodes=3 --num_records=30 \
  --checkpoint_dir="${shared}" --resume_from_epoch=latest \
  >"${tmp}/resume.out" 2>"${tmp}/resume.log" || fail "resume: $(tail -n 5 "${tmp}/resume.log")"
# It loads the newest epoch the lost job logged as committed (a synchronous
# save's epoch line comes after its commit), or the one after it if rank 0
# committed that one and was killed before its line.
logged=$(grep -oE '\] epoch [0-9]+: ' "${tmp}/job.log" | grep -oE '[0-9]+' | sort -n | tail -n 1)
resumed=$(grep -oE "resumed from epoch [0-9]+ of ${shared}" "${tmp}/resume.log" |
          grep -oE 'epoch [0-9]+' | grep -oE '[0-9]+')
[[ -n "${resumed}" ]] || fail "the resume did not load an epoch: $(tail -n 5 "${tmp}/resume.log")"
[[ ${resumed} -eq ${logged} || ${resumed} -eq $((logged + 1)) ]] ||
  fail "resumed from epoch ${resumed}, but the lost job had logged epoch ${logged}"
echo "ok: resumed from epoch ${resumed} (the lost job had logged ${logged} as committed)"
check "the resumed job's result" "result: epochs=11 totals=535,535,535" "$(grep '^result:' "${tmp}/resume.out")"

# down removes the hosts, their processes and the bridge.
bridge=$(cat "${JG_CLUSTER_STATE}/bridge")
holders=$(awk '{print $3}' "${JG_CLUSTER_STATE}/hosts")
"${cluster}" down
check "the bridge is gone" "" "$(ip -o link show "${bridge}" 2>/dev/null)"
for pid in ${holders}; do
  kill -0 "${pid}" 2>/dev/null && fail "host process ${pid} outlived down"
done
check "the state is gone" "no" "$([[ -e "${JG_CLUSTER_STATE}" ]] && echo yes || echo no)"
echo "PASS"
