#!/usr/bin/env bash
# Builds and runs examples/consumer as a separate Bazel workspace would: the
# workspace is copied out of jobgraph's tree, its local_repository `path` is
# pointed at this source tree, and a nested Bazel (Debian's /usr/bin/bazel)
# builds //:main and runs it three times:
#   1. uninterrupted                          result: epochs=3 total=45
#   2. stopped after epoch 2 (a preemption)   result: epochs=2 total=28 (stopped)
#   3. resumed from 2's checkpoints, "latest" result: epochs=3 total=45 (resumed from epoch 2)
#
# The nested Bazel keeps its output base in a cache directory, so only the
# first run compiles jobgraph (a few minutes on two cores); later runs take
# seconds. The cache is
#   ${JOBGRAPH_TEST_CACHE:-~/.cache/jobgraph_consumer_test}/<hash of the source tree path>
# (pass JOBGRAPH_TEST_CACHE with --test_env); delete it to force a cold build.
#
# It needs the real source tree and /usr/share/bazel, hence tags = ["local"].
set -euo pipefail

fail() {
  echo "consumer_test: FAIL: $*" >&2
  exit 1
}

# The source tree: runfiles are symlinks into it (the test runs unsandboxed).
runfile="${TEST_SRCDIR}/${TEST_WORKSPACE}/deps.bzl"
[[ -e "${runfile}" ]] || fail "runfile ${runfile} is missing; is deps.bzl in the test's data?"
src_root=$(dirname "$(readlink -f "${runfile}")")
[[ -f "${src_root}/examples/consumer/WORKSPACE" ]] ||
  fail "${src_root} does not look like jobgraph's source tree (no examples/consumer/WORKSPACE); the test must run with tags = [\"local\"] so that its runfiles point into the tree"

real_bazel=/usr/bin/bazel
[[ -x "${real_bazel}" ]] || fail "${real_bazel} not found; install Debian's bazel-bootstrap (./tools/bazel does)"

# Bazel sets HOME for tests; the cache belongs in the user's real home.
user=$(id -un)
home=$(getent passwd "$(id -u)" | cut -d: -f6)
[[ -n "${home}" ]] || fail "cannot find the home directory of ${user}; set JOBGRAPH_TEST_CACHE"
cache_root="${JOBGRAPH_TEST_CACHE:-${home}/.cache/jobgraph_consumer_test}"
# One cache per source tree, so that worktrees do not share an output base.
cache="${cache_root}/$(printf '%s' "${src_root}" | md5sum | cut -c1-12)"
mkdir -p "${cache}" || fail "cannot create the cache directory ${cache}; set JOBGRAPH_TEST_CACHE to a writable one"

# One nested Bazel per cache at a time (a Bazel output base is single-user).
exec 9>"${cache}/lock"
flock -w 900 9 || fail "another consumer_test has held ${cache}/lock for 15 minutes"

# A fixed copy location: the output base is keyed on the workspace path, so a
# new temporary directory each run would recompile everything.
ws="${cache}/consumer"
rm -rf "${ws}"
mkdir -p "${ws}"
# Not the bazel-* symlinks of a build made inside examples/consumer.
find "${src_root}/examples/consumer" -mindepth 1 -maxdepth 1 ! -name 'bazel-*' \
  -exec cp -R {} "${ws}/" \;
grep -q '^    path = "\.\./\.\.",$' "${ws}/WORKSPACE" ||
  fail "examples/consumer/WORKSPACE no longer has the line '    path = \"../..\",' that this test rewrites; update the sed below"
escaped=${src_root//\\/\\\\}
escaped=${escaped//&/\\&}
escaped=${escaped//|/\\|}
sed -i "s|^    path = \"\.\./\.\.\",\$|    path = \"${escaped}\",|" "${ws}/WORKSPACE"

log="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR}}/nested_bazel.log"
: >"${log}"

# The nested Bazel gets a clean environment: the test's TEST_TMPDIR would
# move its output root, and RUNFILES_* would point the programs it runs at
# this test's runfiles. --nohome_rc keeps the user's ~/.bazelrc out.
nested_bazel() {
  (cd "${ws}" && env -i \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME="${home}" USER="${user}" LANG=C.UTF-8 \
    "${real_bazel}" --nohome_rc --output_user_root="${cache}/bazel" \
    --max_idle_secs=60 "$@")
}
shutdown_nested() {
  nested_bazel shutdown >>"${log}" 2>&1 || true
}
trap shutdown_nested EXIT

start=${SECONDS}
if ! nested_bazel build //:main >>"${log}" 2>&1; then
  tail -n 40 "${log}" >&2
  fail "the nested 'bazel build //:main' in ${ws} failed (log above; the whole log is nested_bazel.log in bazel-testlogs/tests/consumer/consumer_test/test.outputs)"
fi
echo "consumer_test: nested build of //:main: $((SECONDS - start)) s"

# Runs //:main with the given arguments and checks its whole stdout.
expect_run() {
  local expected="$1"
  shift
  local out
  if ! out=$(nested_bazel run //:main -- "$@" 2>>"${log}"); then
    tail -n 20 "${log}" >&2
    fail "'bazel run //:main -- $*' failed (log above)"
  fi
  if [[ "${out}" != "${expected}" ]]; then
    fail "'bazel run //:main -- $*' printed
${out}
expected
${expected}"
  fi
  echo "consumer_test: main $*: ${out}"
}

# Fresh checkpoint directories: a leftover epoch would change what "latest"
# resumes from.
rm -rf "${TEST_TMPDIR}/uninterrupted" "${TEST_TMPDIR}/interrupted"
start=${SECONDS}
expect_run "result: epochs=3 total=45" \
  --checkpoint_dir="${TEST_TMPDIR}/uninterrupted"
ckpt="${TEST_TMPDIR}/interrupted"
expect_run "result: epochs=2 total=28 (stopped)" \
  --checkpoint_dir="${ckpt}" --stop_after_epoch=2
expect_run "result: epochs=3 total=45 (resumed from epoch 2)" \
  --checkpoint_dir="${ckpt}" --resume_from_epoch=latest
echo "consumer_test: three runs: $((SECONDS - start)) s"
echo "consumer_test: PASS"
