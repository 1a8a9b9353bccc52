#!/usr/bin/env bash
# examples/slurm/sum_pipeline_mpi_loop.sbatch, the mpirun relaunch loop, run
# outside Slurm on tools/cluster's namespace hosts (as root; skipped, saying
# why, otherwise), with the commands it lets a user replace: the host list
# (JG_HOSTS), cluster.sh mpirun (JG_MPIRUN), a probe (JG_PROBE) and a
# requeue that records its call (JG_REQUEUE). Every wait is for a line the
# job logs, never a sleep; every result is compared with an uninterrupted
# run's.
#   a. A host lost in the middle of the job: the loop finds it, runs again on
#      the two survivors and the spare, and ends with the exact result.
#   b. The time-limit signal: SIGUSR1 to the loop, the program exits 75, the
#      job is requeued once and no run follows; the requeued job resumes and
#      ends with the exact result.
#   c. A program error with every host alive: one run, stopped with its status.
#   d. A signal while the loop probes the hosts: requeued, no second run.
#   e. MAX_RUNS and MIN_HOSTS, with stand-ins for mpirun and the probe.
set -uo pipefail

runfiles="${TEST_SRCDIR:-$PWD/..}/jobgraph"
# fail, check, cluster_test_start, cluster_test_tmp, cleanup.
# shellcheck source-path=SCRIPTDIR source=test_lib.sh
source "${runfiles}/tools/cluster/test_lib.sh" || exit 1
loop="${runfiles}/examples/slurm/sum_pipeline_mpi_loop.sbatch"
cluster_test_start -f "${loop}"

# The loop's settings come from the environment: only the test's count.
unset RANKS_PER_HOST SPARE_HOSTS MIN_HOSTS MAX_RUNS JOBGRAPH_NODES JOBGRAPH_FLAGS \
  JG_HOSTS JG_PROBE JG_MPIRUN JG_REQUEUE SLURM_JOB_NODELIST SLURM_RESTART_COUNT

# A cluster of its own (state, /24, host names), so that it can run beside
# cluster_test (10.78.x) and beside itself (--runs_per_test).
export JG_CLUSTER_PREFIX=ml
declare -A slurmd_pid  # each host's stand-in slurmd (below)
before_down() {  # cleanup's first step
  # Reaped here, before `down` kills them, so that bash does not report them.
  local pid
  for pid in "${slurmd_pid[@]}"; do kill -KILL "${pid}" && wait "${pid}"; done 2>/dev/null
}
cluster_test_tmp jgloop_test

# The first 10.79.x/24 that no interface has, chosen and taken under a lock,
# so that two runs never pick the same one.
exec {lock}>/tmp/jgloop_test.lock
flock "${lock}"
for n in $(seq 20 219); do
  ip -o -4 addr show | grep -q " 10\.79\.${n}\." || break
done
export JG_CLUSTER_NET="10.79.${n}"
"${cluster}" up 4 || fail "up 4"
flock -u "${lock}"
exec {lock}>&-

# `cluster.sh kill` leaves a host enterable (empty, to serve as a spare), so
# `cluster.sh exec HOST true` cannot tell a lost host (checked in a). What
# srun's probe really needs is the host's slurmd; each host runs a stand-in
# that accepts TCP connections, and the probe connects to it from this
# namespace (the batch host's). The test stops a host's stand-in, and waits
# until it is gone, before it kills the host's other processes, so the probe
# fails for that host whenever the loop gets to it.
slurmd_port=6818
start_slurmd() {  # start_slurmd HOST
  # cluster.sh exec and nsenter exec, so $! is python's own pid.
  "${cluster}" exec "$1" python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(64)
while True:
    s.accept()[0].close()' "${slurmd_port}" </dev/null >/dev/null 2>&1 &
  slurmd_pid[$1]=$!
}
cat >"${tmp}/probe" <<EOF
#!/usr/bin/env bash
# probe HOST: HOST's stand-in slurmd accepts a connection.
addr=\$(awk -v h="\$1" '\$1 == h {print \$2}' "${JG_CLUSTER_STATE}/hosts")
[[ -n "\${addr}" ]] && timeout 10 bash -c "exec 3<>/dev/tcp/\${addr}/${slurmd_port}" 2>/dev/null
EOF
# mpirun as a user runs it here (cluster.sh mpirun), each call recorded;
# exec, so that the loop's SIGUSR1 reaches mpirun.
cat >"${tmp}/mpirun" <<EOF
#!/usr/bin/env bash
echo "\$*" >>"\${MPIRUN_CALLS:?}"
exec "${cluster}" mpirun "\$@"
EOF
cat >"${tmp}/requeue" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"${REQUEUE_CALLS:?}"
EOF
chmod +x "${tmp}/probe" "${tmp}/mpirun" "${tmp}/requeue"
for i in 1 2 3 4; do start_slurmd "ml${i}"; done
for i in 1 2 3 4; do
  for _ in $(seq 1 100); do "${tmp}/probe" "ml${i}" && break; sleep 0.1; done
  "${tmp}/probe" "ml${i}" || fail "ml${i}'s stand-in slurmd does not answer"
done
echo "ok: the stand-in slurmd of ml1..ml4 answers"

# The job (three nodes, 11 epochs of 0.5 s) and its uninterrupted result,
# from one process. Slow enough that a kill or a signal sent on the log line
# of epoch 1 or 2 lands seconds before the job would end, even on a loaded
# machine.
flags="--num_records=30 --record_delay_ms=100 --epoch_delay_ms=200"
expected=$("${sum_pipeline}" --nodes=3 --num_records=30 2>/dev/null | grep '^result:')
check "the uninterrupted run's result" "result: epochs=11 totals=535,535,535" "${expected}"

# start_loop NAME VAR=VALUE...: the loop in the background as a batch job
# would run it (stdout and stderr in one file, $tmp/NAME.out), with its
# checkpoints in $tmp/NAME.ckpt and its calls of mpirun and of the requeue
# in $tmp/NAME.mpirun and $tmp/NAME.requeue. Sets loop_pid.
start_loop() {
  local name=$1
  shift
  env JOBGRAPH_BIN="${sum_pipeline}" CHECKPOINT_DIR="${tmp}/${name}.ckpt" \
    JG_MPIRUN="${tmp}/mpirun" JG_PROBE="${tmp}/probe" JG_REQUEUE="${tmp}/requeue" \
    MPIRUN_CALLS="${tmp}/${name}.mpirun" REQUEUE_CALLS="${tmp}/${name}.requeue" \
    SLURM_JOB_ID=4242 "$@" bash "${loop}" >>"${tmp}/${name}.out" 2>&1 &
  loop_pid=$!
  touch "${tmp}/${name}.mpirun" "${tmp}/${name}.requeue"
}
# wait_line NAME PATTERN: until the loop's output has a line matching
# PATTERN (grep -E), as long as the loop runs (at most 60 s).
wait_line() {
  for _ in $(seq 1 600); do
    grep -qE -- "$2" "${tmp}/$1.out" && return 0
    kill -0 "${loop_pid}" 2>/dev/null || break
    sleep 0.1
  done
  grep -qE -- "$2" "${tmp}/$1.out" || fail "$1: no line '$2' in the loop's output: $(tail -n 20 "${tmp}/$1.out")"
}
# loop_log NAME TEXT: the loop's log lines (date cut off) that contain TEXT.
loop_log() {
  grep -F -- "$2" "${tmp}/$1.out" | grep '^sbatch\[' | sed -E 's/^(sbatch\[[^]]*\]): [0-9-]+ [0-9:]+ /\1 /'
}
calls() { cut -d' ' -f1-3 "${tmp}/$1.mpirun"; }  # HOSTS -np N of every mpirun call

# ---- a. ml2 lost once the job has committed epoch 2 (a synchronous save's
# epoch line comes after its commit).
echo "-- a: a host lost"
start_loop a JG_HOSTS="ml1 ml2 ml3 ml4" SPARE_HOSTS=1 JOBGRAPH_FLAGS="${flags}"
wait_line a '\] epoch 2: '
kill -KILL "${slurmd_pid[ml2]}" && wait "${slurmd_pid[ml2]}" 2>/dev/null
"${tmp}/probe" ml2 && fail "ml2's probe still succeeds after its slurmd was stopped"
"${cluster}" kill ml2 || fail "kill ml2"
"${cluster}" exec ml2 true ||
  fail "cluster.sh exec ml2 true fails after kill: cluster.sh changed, and the stand-in slurmd may be needless"
echo "ok: after cluster.sh kill, exec ml2 still succeeds and the probe fails"
wait "${loop_pid}"
check "a: the loop's exit status" 0 $?
check "a: the two runs of mpirun" "ml1,ml2,ml3 -np 3
ml1,ml3,ml4 -np 3" "$(calls a)"
check "a: the loop names the lost host and the next hosts" \
  "sbatch[4242] lost ml2; spares taken: ml4; next run on ml1,ml3,ml4" "$(loop_log a 'lost ')"
check "a: the second run" "sbatch[4242] run 2 of at most 5: 3 ranks on ml1,ml3,ml4 (spares: none)" \
  "$(loop_log a 'run 2 of')"
run1_status=$(loop_log a 'run 1 ended with status' | grep -oE 'status [0-9]+' | grep -oE '[0-9]+')
[[ -n "${run1_status}" && "${run1_status}" -ne 0 ]] || fail "a: run 1 did not fail: $(loop_log a 'run 1 ended')"
check "a: the probe after run 1" \
  "sbatch[4242] run 1 ended with status ${run1_status}; probing the hosts: ml1 ml2 ml3 ml4" \
  "$(loop_log a 'run 1 ended')"
check "a: the end" "sbatch[4242] run 2 ended with status 0: the job is done" "$(loop_log a 'run 2 ended')"
check "a: the result" "${expected}" "$(grep '^result:' "${tmp}/a.out")"
# Run 2 loads the newest epoch run 1 logged as committed, or the one after it
# if rank 0 committed it and was killed before its line.
logged=$(sed '/lost ml2/q' "${tmp}/a.out" | grep -oE '\] epoch [0-9]+: ' | grep -oE '[0-9]+' | sort -n | tail -n 1)
resumed=$(grep -oE "resumed from epoch [0-9]+ of ${tmp}/a.ckpt" "${tmp}/a.out" | grep -oE 'epoch [0-9]+' | grep -oE '[0-9]+')
[[ -n "${resumed}" && ( ${resumed} -eq ${logged} || ${resumed} -eq $((logged + 1)) ) ]] ||
  fail "a: run 2 resumed from epoch '${resumed}', but run 1 had logged epoch ${logged}"
echo "ok: a: run 2 resumed from epoch ${resumed} (run 1 had logged ${logged} as committed)"
check "a: no requeue" "" "$(cat "${tmp}/a.requeue")"

# ml2 is gone for the rest of the test, as a lost machine would be.
three="ml1 ml3 ml4"

# ---- b. The time limit's signal, once the job has logged epoch 1.
echo "-- b: the time limit"
start_loop b JG_HOSTS="${three}" JOBGRAPH_FLAGS="${flags}"
wait_line b '\] epoch 1: '
kill -USR1 "${loop_pid}"
wait "${loop_pid}"
check "b: the loop's exit status (requeued)" 0 $?
grep -q 'preempted by SIGUSR1 .*; exiting with status 75$' "${tmp}/b.out" ||
  fail "b: the program did not log 'preempted by SIGUSR1 ...; exiting with status 75': $(tail -n 20 "${tmp}/b.out")"
check "b: the program's exit status, through mpirun" \
  "sbatch[4242] run 1 preempted (exit 75 from mpirun); requeueing job 4242" "$(loop_log b 'preempted')"
check "b: the signal forwarded" 1 "$(loop_log b 'got SIGUSR1, forwarding SIGUSR1 to mpirun' | wc -l)"
check "b: the requeue, once, with the job id" "4242" "$(cat "${tmp}/b.requeue")"
check "b: one run of mpirun" "ml1,ml3,ml4 -np 3" "$(calls b)"
check "b: no result" "" "$(grep '^result:' "${tmp}/b.out")"
# The requeued job: the same command, in a new allocation.
echo "-- b: the requeued job"
start_loop b2 JG_HOSTS="${three}" JOBGRAPH_FLAGS="${flags}" CHECKPOINT_DIR="${tmp}/b.ckpt" \
  SLURM_RESTART_COUNT=1
wait "${loop_pid}"
check "b: the requeued loop's exit status" 0 $?
grep -q "resumed from epoch [0-9]* of ${tmp}/b.ckpt" "${tmp}/b2.out" ||
  fail "b: the requeued job did not resume: $(tail -n 20 "${tmp}/b2.out")"
check "b: the requeued job's runs of mpirun" "ml1,ml3,ml4 -np 3" "$(calls b2)"
check "b: the requeued job's result" "${expected}" "$(grep '^result:' "${tmp}/b2.out")"

# ---- c. A program error (an unknown flag), every host alive.
echo "-- c: a program error"
start_loop c JG_HOSTS="${three}" JOBGRAPH_FLAGS="--no_such_flag"
wait "${loop_pid}"
status=$?
check "c: the loop's exit status" 1 "${status}"
grep -q "Unknown command line flag 'no_such_flag'" "${tmp}/c.out" || fail "c: the program did not reject the flag"
check "c: why it stopped" "sbatch[4242] run 1 failed with status 1 and every host of it is alive: the program failed, and another run would fail the same way; stopping" \
  "$(loop_log c 'run 1 failed')"
check "c: one run of mpirun" "ml1,ml3,ml4 -np 3" "$(calls c)"
check "c: no requeue" "" "$(cat "${tmp}/c.requeue")"

# ---- d. SIGUSR1 while the loop probes the hosts after a failed run: the
# probe sends it (once) and says ml4 is lost, so without the signal the loop
# would run again on ml1 and ml3.
echo "-- d: a signal between runs"
cat >"${tmp}/probe_signal" <<EOF
#!/usr/bin/env bash
# The loop's pid, which the test writes once the loop has started.
until [[ -s "${tmp}/d.pid" ]]; do sleep 0.05; done
mkdir "${tmp}/d.signalled" 2>/dev/null && kill -USR1 "\$(cat "${tmp}/d.pid")"
[[ "\$1" != ml4 ]] && "${tmp}/probe" "\$1"
EOF
chmod +x "${tmp}/probe_signal"
start_loop d JG_HOSTS="${three}" JOBGRAPH_FLAGS="--no_such_flag" JG_PROBE="${tmp}/probe_signal"
echo "${loop_pid}" >"${tmp}/d.pid"
wait "${loop_pid}"
check "d: the loop's exit status (requeued)" 0 $?
check "d: the signal between runs" "sbatch[4242] got SIGUSR1 between runs; no new run will start" \
  "$(loop_log d 'got SIGUSR1 between')"
check "d: the requeue" "sbatch[4242] got SIGUSR1 while probing the hosts; requeueing job 4242" \
  "$(loop_log d 'requeueing')"
check "d: the requeue, once, with the job id" "4242" "$(cat "${tmp}/d.requeue")"
check "d: one run of mpirun" "ml1,ml3,ml4 -np 3" "$(calls d)"

# ---- e. MAX_RUNS and MIN_HOSTS. Stand-ins: every run of mpirun fails (137)
# and its last host is then lost.
echo "-- e: MAX_RUNS and MIN_HOSTS"
cat >"${tmp}/mpirun_lose_last" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"${MPIRUN_CALLS:?}"
echo "${1##*,}" >>"${MPIRUN_CALLS}.lost"
exit 137
EOF
cat >"${tmp}/probe_lost" <<'EOF'
#!/usr/bin/env bash
! grep -qx -- "$1" "${MPIRUN_CALLS:?}.lost"
EOF
chmod +x "${tmp}/mpirun_lose_last" "${tmp}/probe_lost"
start_loop e1 JG_HOSTS="h1,h2,h3,h4,h5" SPARE_HOSTS=1 MAX_RUNS=2 \
  JG_MPIRUN="${tmp}/mpirun_lose_last" JG_PROBE="${tmp}/probe_lost"
wait "${loop_pid}"
check "e: MAX_RUNS=2: the exit status" 137 $?
check "e: MAX_RUNS=2: the runs" "h1,h2,h3,h4 -np 4
h1,h2,h3,h5 -np 4" "$(calls e1)"
check "e: MAX_RUNS=2: why it stopped" \
  "sbatch[4242] run 2 ended with status 137 and was the last one (MAX_RUNS=2); stopping" \
  "$(loop_log e1 'run 2 ended')"
start_loop e2 JG_HOSTS="h1 h2 h3" RANKS_PER_HOST=2 MIN_HOSTS=2 \
  JG_MPIRUN="${tmp}/mpirun_lose_last" JG_PROBE="${tmp}/probe_lost"
wait "${loop_pid}"
check "e: MIN_HOSTS=2: the exit status" 137 $?
check "e: MIN_HOSTS=2: the runs, two ranks a host" "h1,h1,h2,h2,h3,h3 -np 6
h1,h1,h2,h2 -np 4" "$(calls e2)"
check "e: MIN_HOSTS=2: why it stopped" \
  "sbatch[4242] 1 host(s) left, fewer than MIN_HOSTS=2; stopping with run 2's status 137" \
  "$(loop_log e2 'left, fewer')"

echo "-- the loop's output in a"
cat "${tmp}/a.out"
echo "PASS"
