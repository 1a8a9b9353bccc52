#!/bin/bash
# End-to-end test of examples/slurm/sum_pipeline.sbatch on a one-machine Slurm cluster.
#
#   bash tools/slurm/local_cluster_test.sh        # from the repository root, as root
#
# It installs Debian's Slurm and MUNGE packages if they are missing, starts a private
# munged, slurmctld and slurmd (configuration, state, spool and logs in a temporary
# directory; nothing under /etc is changed), submits the sbatch script with slow epochs,
# sends USR1 to the batch shell as Slurm does before the time limit, and checks that:
# the program logs "preempted by SIGUSR1", the job is requeued (Restarts=1), the
# requeued run logs "resumed from epoch N", the job completes with exit code 0, its
# output ends with "result: epochs=4 totals=145", and `ckpt verify` accepts the
# checkpoint directory. The requeued job starts by itself (cred_expire=10 in the generated
# slurm.conf; see examples/slurm/README.md). The daemons it started are stopped when it exits.
#
# Environment:
#   JOBGRAPH_BIN=PATH  program to run (default: build //examples:sum_pipeline and //tools:ckpt
#                      with ./tools/bazel and copy them out of bazel-bin)
#   CKPT_BIN=PATH      ckpt binary for the final `ckpt verify`; empty skips that check
#                      (default: the one built above; skipped when JOBGRAPH_BIN is given)
#   EPOCH_DELAY_MS=N   --epoch_delay_ms passed to the program (default 2000)
#   WAIT_SECS=N        upper bound of every wait (default 180)
#   KEEP=1             keep the temporary directory (logs, output, checkpoints)
#   LOCAL_TIER=1       run the program with a node-local tier (--local_checkpoint_dir in the
#                      temporary directory, %h the host name): the preempted run must copy
#                      its checkpoint to the checkpoint directory before it exits 75 (the
#                      log's "flushed to" line comes first), and the requeued run resumes
#                      from the local tier
#   MPI=1              test examples/slurm/sum_pipeline_mpi.sbatch instead: mpirun with one
#                      rank per CPU of the node, the job's 4 nodes spread over them
#   LOOP=1             test examples/slurm/sum_pipeline_mpi_loop.sbatch instead, the mpirun
#                      relaunch loop, on the one node with one rank per CPU
#                      (RANKS_PER_HOST) and the job's 4 nodes: the checks above, and the
#                      loop's log shows one run that was preempted and requeued the job,
#                      and one run in the requeued job that ended it, nothing probed
set -uo pipefail

WAIT_SECS=${WAIT_SECS:-180}
EPOCH_DELAY_MS=${EPOCH_DELAY_MS:-2000}
MPI=${MPI:-0}
LOOP=${LOOP:-0}
LOCAL_TIER=${LOCAL_TIER:-0}
EXPECTED_RESULT="result: epochs=4 totals=145"
[[ $MPI == 1 || $LOOP == 1 ]] && EXPECTED_RESULT="result: epochs=4 totals=145,145,145,145"

START=$(date +%s)
step() { echo "[$(($(date +%s) - START))s] $*"; }

PATH=$PATH:/usr/sbin:/sbin
TMP=""
OUT=""
JOBID=""
MADE_POLICY=0  # 1 while this script's /usr/sbin/policy-rc.d is in place
PIDS=()  # daemons started here: munged slurmctld slurmd

show_logs() {
  [[ -n $OUT && -f $OUT ]] && { echo "---- job output $OUT"; cat "$OUT"; }
  if [[ -n $TMP && -d $TMP/log ]]; then
    local d f
    for d in munged slurmctld slurmd; do
      # A daemon writes to its log file once it has read its configuration; before
      # that, errors only reach its stdout.
      f=$TMP/log/$d.log
      [[ -s $f ]] || f=$TMP/log/$d.stdout
      [[ -f $f ]] || continue
      echo "---- last lines of $f"
      tail -n 15 "$f"
    done
  fi
}

fail() {
  echo "FAIL: $*" >&2
  [[ -n $JOBID ]] && scontrol show job "$JOBID" 2>/dev/null | sed 's/^/  /'
  show_logs
  exit 1
}

cleanup() {
  local rc=$? pid i
  trap - EXIT INT TERM
  [[ $MADE_POLICY == 1 ]] && rm -f /usr/sbin/policy-rc.d
  if [[ -n $TMP && ${#PIDS[@]} -gt 0 ]]; then
    step "stopping jobs and the daemons this test started"
    # Cancel our jobs first, so that no slurmstepd or program outlives slurmd.
    if [[ -n $JOBID ]]; then
      scancel "$JOBID" 2>/dev/null
      for ((i = 0; i < 15; i++)); do
        [[ -z $(squeue -h -j "$JOBID" -o %i 2>/dev/null) ]] && break
        sleep 1
      done
    fi
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do
      for ((i = 0; i < 20; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
      done
      kill -KILL "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    done
  fi
  if [[ -n $TMP && -d $TMP ]]; then
    if [[ ${KEEP:-0} == 1 ]]; then
      step "kept $TMP (KEEP=1)"
    else
      rm -rf "$TMP"
    fi
  fi
  step "done, exit status $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for DESCRIPTION COMMAND...: run COMMAND every second until it succeeds, at most
# WAIT_SECS times; fail naming DESCRIPTION if it never does.
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < WAIT_SECS; i++)); do
    "$@" && return 0
    sleep 1
  done
  fail "timed out after ${WAIT_SECS} s waiting for: $what"
}

job_field() {  # job_field NAME: the value of NAME= in `scontrol show job -o`
  scontrol show job -o "$JOBID" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}

job_ended() {  # the job is in a final state (it is not going to run again by itself)
  case $(job_field JobState) in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) return 0 ;;
  esac
  return 1
}

[[ $(id -u) == 0 ]] || { echo "FAIL: run as root (it installs packages and starts slurmd)" >&2; exit 1; }
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO" || exit 1
SBATCH_SCRIPT=$REPO/examples/slurm/sum_pipeline.sbatch
SBATCH_FLAGS=()
EXTRA_FLAGS=""
if [[ $MPI == 1 ]]; then
  SBATCH_SCRIPT=$REPO/examples/slurm/sum_pipeline_mpi.sbatch
  SBATCH_FLAGS=(--ntasks="$(nproc)")
  EXTRA_FLAGS=" --nodes=4"
fi
if [[ $LOOP == 1 ]]; then
  SBATCH_SCRIPT=$REPO/examples/slurm/sum_pipeline_mpi_loop.sbatch
  # One host here; sbatch passes these on to the script.
  SBATCH_FLAGS=(--nodes=1 --ntasks-per-node="$(nproc)")
  RANKS_PER_HOST=$(nproc)
  export RANKS_PER_HOST JOBGRAPH_NODES=4
fi
[[ -f $SBATCH_SCRIPT ]] || fail "missing $SBATCH_SCRIPT"
[[ $LOCAL_TIER == 1 && ( $MPI == 1 || $LOOP == 1 ) ]] && fail "LOCAL_TIER=1 is for one process (an MPI job refuses a local tier)"

# ---- packages
PACKAGES=(munge slurmctld slurmd slurm-client)
if ! command -v munged >/dev/null || ! command -v slurmctld >/dev/null ||
   ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null; then
  step "installing ${PACKAGES[*]} with apt-get"
  apt-get update -qq || fail "apt-get update"
  for p in "${PACKAGES[@]}"; do
    [[ $(apt-cache policy "$p") == *"Candidate: "[0-9]* ]] || fail "apt-cache policy $p: no candidate"
  done
  # Without systemd, the packages' scripts would try to start the daemons with the
  # default configuration; refuse that for the install when nothing else decides it.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    MADE_POLICY=1
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${PACKAGES[@]}" > /tmp/jobgraph-slurm-apt.log 2>&1
  apt_rc=$?
  if [[ $MADE_POLICY == 1 ]]; then
    rm -f /usr/sbin/policy-rc.d
    MADE_POLICY=0
  fi
  [[ $apt_rc == 0 ]] || { tail -n 20 /tmp/jobgraph-slurm-apt.log; fail "apt-get install ${PACKAGES[*]}"; }
fi
step "using $(slurmctld -V) and munge $(munged -V 2>&1 | head -n 1 | awk '{print $1}')"

TMP=$(mktemp -d /tmp/jobgraph-slurm.XXXXXX) || exit 1
chmod 755 "$TMP"
mkdir -p "$TMP/bin" "$TMP/munge" "$TMP/log" "$TMP/state" "$TMP/spool/slurmd.$(hostname -s)"
chmod 755 "$TMP/munge"

# ---- the program
if [[ -n ${JOBGRAPH_BIN:-} ]]; then
  [[ -x $JOBGRAPH_BIN ]] || fail "JOBGRAPH_BIN=$JOBGRAPH_BIN is not an executable"
  cp "$JOBGRAPH_BIN" "$TMP/bin/sum_pipeline" || fail "copy $JOBGRAPH_BIN"
  CKPT=${CKPT_BIN:-}
  step "program: $JOBGRAPH_BIN (copied to $TMP/bin)"
else
  step "building //examples:sum_pipeline //tools:ckpt with ./tools/bazel"
  ./tools/bazel build //examples:sum_pipeline //tools:ckpt || fail "bazel build"
  cp bazel-bin/examples/sum_pipeline "$TMP/bin/sum_pipeline" || fail "copy sum_pipeline"
  cp bazel-bin/tools/ckpt "$TMP/bin/ckpt" || fail "copy ckpt"
  CKPT=${CKPT_BIN-$TMP/bin/ckpt}
  step "program: bazel-bin/examples/sum_pipeline (copied to $TMP/bin)"
fi
if [[ -n $CKPT ]]; then
  [[ -x $CKPT ]] || fail "CKPT_BIN=$CKPT is not an executable"
  [[ $CKPT == "$TMP"/* ]] || { cp "$CKPT" "$TMP/bin/ckpt" && CKPT=$TMP/bin/ckpt; }
fi

# ---- munge: a private munged on its own socket, with the system key or a new one
SOCK=$TMP/munge/munge.socket
if [[ -r /etc/munge/munge.key ]]; then
  install -m 600 /etc/munge/munge.key "$TMP/munge/munge.key"
  step "starting munged (key copied from /etc/munge/munge.key)"
elif command -v mungekey >/dev/null; then
  mungekey --create --keyfile="$TMP/munge/munge.key" || fail "mungekey --create"
  step "starting munged (new key made with mungekey)"
else
  dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$TMP/munge/munge.key"
  step "starting munged (new key made with dd)"
fi
munged --foreground --force --socket="$SOCK" --key-file="$TMP/munge/munge.key" \
  --log-file="$TMP/log/munged.log" --pid-file="$TMP/munge/munged.pid" \
  --seed-file="$TMP/munge/munged.seed" > "$TMP/log/munged.stdout" 2>&1 &
PIDS+=($!)
munge_ok() { munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" > /dev/null 2>&1; }
wait_for "munged to answer on $SOCK" munge_ok

# ---- slurm.conf
listening_ports() {  # local TCP ports in LISTEN state (0A), decimal
  local local_addr st
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ local_addr _ st _; do
    [[ $st == 0A ]] && echo $((16#${local_addr##*:}))
  done
}
free_port() {  # free_port AFTER: the first port above AFTER that nothing listens on
  local p=$1 used
  used=" $(listening_ports | tr '\n' ' ') "
  while :; do
    p=$((p + 1))
    [[ $used == *" $p "* ]] || { echo "$p"; return; }
  done
}
CTLD_PORT=$(free_port $((20000 + RANDOM % 20000)))
SLURMD_PORT=$(free_port "$CTLD_PORT")
NODE=$(hostname -s)
CPUS=$(nproc)
export SLURM_CONF=$TMP/slurm.conf
cat > "$SLURM_CONF" <<EOF
# Written by tools/slurm/local_cluster_test.sh: one node, everything under $TMP.
ClusterName=jobgraphtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK,cred_expire=10
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool/slurmd.%n
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobRequeue=1
MinJobAge=60
ReturnToService=2
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
# Commands run here and in the job must not see another cluster's settings.
while read -r v; do unset "$v"; done < <(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p' | grep -vx SLURM_CONF)

step "starting slurmctld (port $CTLD_PORT) and slurmd (port $SLURMD_PORT, node $NODE, $CPUS CPUs)"
slurmctld -D -f "$SLURM_CONF" > "$TMP/log/slurmctld.stdout" 2>&1 &
PIDS+=($!)
slurmd -D -f "$SLURM_CONF" -N "$NODE" > "$TMP/log/slurmd.stdout" 2>&1 &
PIDS+=($!)
node_idle() {
  local pid
  for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || fail "daemon $pid exited early"; done
  [[ $(sinfo -h -n "$NODE" -o %t 2>/dev/null) == idle ]]
}
wait_for "sinfo to show node $NODE idle" node_idle
step "node $NODE is idle"

# ---- submit
CKPT_DIR=$TMP/checkpoints
LOCAL_DIR=$TMP/local-$(hostname)
[[ $LOCAL_TIER == 1 ]] && EXTRA_FLAGS+=" --local_checkpoint_dir=$TMP/local-%h"
OUT_PATTERN=$TMP/sum_pipeline-%j.out
JOBID=$(JOBGRAPH_BIN=$TMP/bin/sum_pipeline CHECKPOINT_DIR=$CKPT_DIR \
  JOBGRAPH_FLAGS="--epoch_delay_ms=$EPOCH_DELAY_MS$EXTRA_FLAGS" \
  sbatch --parsable "${SBATCH_FLAGS[@]}" --chdir="$TMP" --output="$OUT_PATTERN" \
  "$SBATCH_SCRIPT") ||
  fail "sbatch $SBATCH_SCRIPT"
JOBID=${JOBID%%;*}
OUT=${OUT_PATTERN//%j/$JOBID}
step "submitted job $JOBID (--epoch_delay_ms=$EPOCH_DELAY_MS), output $OUT"

first_epoch_logged() {
  local state
  state=$(job_field JobState)
  case $state in PENDING|CONFIGURING|RUNNING) ;; *) fail "job $JOBID is $state before epoch 1" ;; esac
  grep -q 'epoch 1:' "$OUT" 2>/dev/null
}
wait_for "the program to log 'epoch 1:'" first_epoch_logged
step "the program logged epoch 1; sending USR1 to the batch shell: scancel --signal=USR1 --batch $JOBID"
T_SIGNAL=$(date +%s)
scancel --signal=USR1 --batch "$JOBID" || fail "scancel --signal=USR1 --batch $JOBID"

preempted() {
  grep -q 'preempted by SIGUSR1' "$OUT" 2>/dev/null && return 0
  ! job_ended || fail "job $JOBID ended ($(job_field JobState)) without the program logging 'preempted by SIGUSR1'"
  return 1
}
wait_for "the program to log 'preempted by SIGUSR1'" preempted
step "the program logged: $(grep -m 1 'preempted by SIGUSR1' "$OUT" | sed 's/^.*\] //')"

requeued() {
  [[ $(job_field Restarts) == 1 ]] && [[ $(job_field JobState) =~ ^(PENDING|CONFIGURING|RUNNING)$ ]] && return 0
  ! job_ended || fail "job $JOBID ended ($(job_field JobState)) instead of being requeued"
  return 1
}
wait_for "job $JOBID to be requeued (Restarts=1, PENDING or RUNNING)" requeued
T_REQUEUE=$(date +%s)
step "job $JOBID requeued $((T_REQUEUE - T_SIGNAL)) s after the signal: JobState=$(job_field JobState) Reason=$(job_field Reason) Restarts=1"

# Slurm holds a requeued batch job until its begin time, cred_expire + 1 seconds after
# the old run's end (11 s with the cred_expire=10 above; 121 s by default): a
# credential it signs for the new run must be newer than the old run's revocation, which
# slurmd keeps until it expires. Releasing it sooner (scontrol update StartTime=now) can
# start the new run in the second of the revocation, and slurmd then refuses it ("Job
# credential revoked"). So the job starts by itself; sched_interval=2 lets the scheduler
# see it soon after.
step "Slurm holds the requeued job until $(job_field EligibleTime) (Reason=$(job_field Reason)); it starts by itself"
finished() {
  job_ended && return 0
  local restarts
  restarts=$(job_field Restarts)
  # Empty when scontrol did not answer this time: ask again next second.
  [[ -z $restarts || $restarts == 1 ]] || fail "job $JOBID restarted $restarts times"
  return 1
}
wait_for "job $JOBID to finish" finished
T_DONE=$(date +%s)
step "job $JOBID finished $((T_DONE - T_REQUEUE)) s after the requeue: JobState=$(job_field JobState) ExitCode=$(job_field ExitCode) Restarts=$(job_field Restarts)"

# ---- checks
[[ $(job_field JobState) == COMPLETED ]] || fail "job state is $(job_field JobState), not COMPLETED"
[[ $(job_field ExitCode) == 0:0 ]] || fail "job exit code is $(job_field ExitCode), not 0:0"
[[ $(job_field Restarts) == 1 ]] || fail "job restarted $(job_field Restarts) times, not once"
grep -q 'resumed from epoch' "$OUT" || fail "the requeued run did not log 'resumed from epoch'"
n_preempt=$(grep -n -m 1 'preempted by SIGUSR1' "$OUT" | cut -d: -f1)
n_resume=$(grep -n -m 1 'resumed from epoch' "$OUT" | cut -d: -f1)
((n_resume > n_preempt)) || fail "'resumed from epoch' comes before 'preempted by SIGUSR1'"
n_results=$(grep -c '^result:' "$OUT")
[[ $n_results == 1 ]] || fail "the output has $n_results 'result:' lines, not 1"
# The last line the program wrote (the sbatch script's own lines start with "sbatch[").
last=$(grep -v '^sbatch\[' "$OUT" | tail -n 1)
[[ $last == "$EXPECTED_RESULT" ]] || fail "the program's last line is '$last', not '$EXPECTED_RESULT'"
step "output: preempted, requeued, $(grep -m 1 'resumed from epoch' "$OUT" | sed 's/^.*\] //'), ended with '$last'"
if [[ $LOOP == 1 ]]; then
  # One run in each allocation: the first preempted, the second done. Nothing failed, so
  # nothing was probed.
  loop_lines=$(grep -E '^sbatch\[[0-9]+\]: [0-9-]+ [0-9:]+ (run [0-9]+ |got SIG|.*probing)' "$OUT" |
    sed -E 's/^sbatch\[[0-9]+\]: [0-9-]+ [0-9:]+ //; s/\(pid [0-9]+\)/(pid N)/')
  expected_lines="run 1 of at most 5: $(nproc) ranks on $NODE (spares: none)
got SIGUSR1, forwarding SIGUSR1 to mpirun (pid N)
run 1 preempted (exit 75 from mpirun); requeueing job $JOBID
run 1 of at most 5: $(nproc) ranks on $NODE (spares: none)
run 1 ended with status 0: the job is done"
  [[ $loop_lines == "$expected_lines" ]] ||
    fail "the loop's log lines are
$loop_lines
not
$expected_lines"
  step "the loop: one preempted run, the requeue, one run to the end"
fi
if [[ $LOCAL_TIER == 1 ]]; then
  # The epoch the preempted run committed reached the checkpoint directory before the run
  # exited 75: "epoch N flushed to" (in the background, or by the preemption) comes first.
  stopped=$(grep -m 1 'preempted by SIGUSR1' "$OUT" | sed -E 's/.*(in|after) epoch ([0-9]+).*/\2/')
  [[ $stopped =~ ^[0-9]+$ ]] || fail "cannot tell the preempted epoch from: $(grep -m 1 'preempted by SIGUSR1' "$OUT")"
  n_flushed=$(grep -n -m 1 "epoch $stopped flushed to $CKPT_DIR" "$OUT" | cut -d: -f1)
  n_exit=$(grep -n -m 1 'exiting with status 75' "$OUT" | cut -d: -f1)
  [[ -n $n_flushed && -n $n_exit ]] && ((n_flushed < n_exit)) ||
    fail "the preempted run did not log 'epoch $stopped flushed to $CKPT_DIR' before 'exiting with status 75'"
  grep -q "resumed from epoch [0-9]* of $LOCAL_DIR (the local tier)" "$OUT" ||
    fail "the requeued run did not resume from the local tier $LOCAL_DIR"
  step "local tier: flushed before the exit, resumed from $LOCAL_DIR"
  [[ -z $CKPT ]] || "$CKPT" verify "$LOCAL_DIR" || fail "ckpt verify $LOCAL_DIR"
fi
if [[ -n $CKPT ]]; then
  step "verifying the checkpoints: ckpt verify $CKPT_DIR"
  "$CKPT" verify "$CKPT_DIR" || fail "ckpt verify $CKPT_DIR"
else
  step "skipping ckpt verify (CKPT_BIN is empty)"
fi

echo "---- job output $OUT"
cat "$OUT"
echo "----"
step "PASS: preemption, requeue and resume under Slurm (signal to requeue $((T_REQUEUE - T_SIGNAL)) s, requeue to completion $((T_DONE - T_REQUEUE)) s)"
