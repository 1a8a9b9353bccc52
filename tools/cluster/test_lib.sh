# shellcheck shell=bash
# tools/cluster/test_lib.sh: the preamble that the namespace-cluster tests
# (cluster_test.sh, mpirun_loop_test.sh, tier_cluster_test.sh) share. Sourced,
# never run, from the test's runfiles (it is in each sh_test's data):
#   runfiles="${TEST_SRCDIR:-$PWD/..}/jobgraph"
#   source "${runfiles}/tools/cluster/test_lib.sh" || exit 1
#   cluster_test_start [-x PATH | -f PATH]...
#   ... the test's own settings (JG_CLUSTER_PREFIX, JG_CLUSTER_NET, unset) ...
#   cluster_test_tmp NAME
# What each test chooses stays in the test: its temp directory's name, its /24
# (JG_CLUSTER_NET) and host names (JG_CLUSTER_PREFIX), the runfiles it needs
# beyond cluster.sh and sum_pipeline, and what it stops before `down`.
#
# runfiles (set by the test, before sourcing): the runfiles tree's jobgraph/.
# fail MESSAGE...: "FAIL: MESSAGE" on stderr; the test exits 1.
# check DESCRIPTION EXPECTED ACTUAL: "ok: DESCRIPTION" if ACTUAL is EXPECTED,
#   else fail with both.
# cluster_test_start [-x PATH | -f PATH]...: not as root, the SKIPPED line and
#   the test exits 0 (the cluster needs root). As root, sets cluster
#   (tools/cluster/cluster.sh) and sum_pipeline (examples/sum_pipeline) under
#   $runfiles, and fails ("runfiles missing under ...") unless both are
#   executable and each further PATH is executable (-x) or a file (-f).
# cluster_test_tmp NAME: sets tmp, a new directory /tmp/NAME.XXXXXX; exports
#   JG_CLUSTER_STATE=$tmp/state, TMPDIR and OMPI_MCA_orte_tmpdir_base=$tmp,
#   and ASAN_OPTIONS and LSAN_OPTIONS (below); traps EXIT with cleanup.
# cleanup: on EXIT: the test's before_down if it defines one (processes of its
#   own to stop first), then `cluster.sh down`, and $tmp removed.

fail() { echo "FAIL: $*" >&2; exit 1; }
check() {  # check DESCRIPTION EXPECTED ACTUAL
  if [[ "$2" != "$3" ]]; then fail "$1: expected '$2', got '$3'"; fi
  echo "ok: $1"
}

cluster_test_start() {  # cluster_test_start [-x PATH | -f PATH]...
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIPPED: tools/cluster needs root (namespaces, a bridge, mounts); running as uid $(id -u)"
    exit 0
  fi
  cluster="${runfiles:?}/tools/cluster/cluster.sh"
  sum_pipeline="${runfiles}/examples/sum_pipeline"
  local ok=yes
  [[ -x "${cluster}" && -x "${sum_pipeline}" ]] || ok=no
  while (( $# >= 2 )); do
    case "$1" in
      -x) [[ -x "$2" ]] || ok=no ;;
      -f) [[ -f "$2" ]] || ok=no ;;
      *) fail "cluster_test_start: $1 (not -x or -f)" ;;
    esac
    shift 2
  done
  (( $# == 0 )) || fail "cluster_test_start: $1 without a path"
  [[ ${ok} == yes ]] || fail "runfiles missing under ${runfiles}"
}

cluster_test_tmp() {  # cluster_test_tmp NAME
  tmp="$(mktemp -d "/tmp/$1.XXXXXX")"  # short: Open MPI's sockets
  export JG_CLUSTER_STATE="${tmp}/state"
  export TMPDIR="${tmp}" OMPI_MCA_orte_tmpdir_base="${tmp}"
  # Under --config=asan, as tests/mpi_test.cc's MpiEnv says: Open MPI's frames
  # need the slow unwinder, and LeakSanitizer cannot scan ranks' TLS. Other
  # builds ignore these.
  export ASAN_OPTIONS=fast_unwind_on_malloc=0 LSAN_OPTIONS=use_tls=0
  trap cleanup EXIT
}

cleanup() {
  if declare -F before_down >/dev/null; then before_down; fi
  "${cluster}" down
  rm -rf "${tmp}"
}
