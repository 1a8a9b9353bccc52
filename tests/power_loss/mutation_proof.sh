#!/usr/bin/env bash
# The mutation proof of //tests/power_loss:power_loss_test: replaces one
# durability call of the save and commit path at a time with a no-op, runs
# the test, and expects it to fail (but for the one call listed as beyond a
# one-machine test); then restores the file. Prints, per mutation, which
# scenarios failed and the first failure's message.
#
#   tests/power_loss/mutation_proof.sh [BAZEL_ARGS...]
#
# Run it in a checkout of its own (it edits sources; `git checkout` puts each
# file back): e.g. `git clone . /tmp/mutation && /tmp/mutation/tests/
# power_loss/mutation_proof.sh`. Exits 1 if any mutation did other than
# expected. Takes about 2 minutes a mutation on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/../.."
if ! git diff --quiet -- checkpoint; then
  echo "mutation_proof: checkpoint/ has local changes; run it in a clean checkout" >&2
  exit 2
fi

# name | file | exact text (one occurrence) | replacement | expected
# "expected" is "caught", or "survives" for a call that this one-machine test
# cannot prove (tests/power_loss/README.md says why); the script fails when
# a mutation does other than expected.
mutations=(
  "atomic file (commit log, its previous copy, a database's file list): fsync of the temporary file|checkpoint/util/file_util.cc|  JG_RETURN_IF_ERROR(Fsync(fd_, tmp_));||caught"
  "atomic file by path (a database's file list): fsync of its directory after the rename|checkpoint/util/file_util.cc|  return dir_fd < 0 ? FsyncDir(parent) : Fsync(dir_fd, parent);|  return dir_fd < 0 ? absl::OkStatus() : Fsync(dir_fd, parent);|caught"
  "atomic file by descriptor (the commit log): fsync of the checkpoint directory after the rename|checkpoint/util/file_util.cc|  return dir_fd < 0 ? FsyncDir(parent) : Fsync(dir_fd, parent);|  return dir_fd < 0 ? FsyncDir(parent) : absl::OkStatus();|caught"
  "database close: fsync of each file|checkpoint/util/file_util.cc|    JG_RETURN_IF_ERROR(FsyncFile(path));||caught"
  "database close: the whole durable close|checkpoint/leveldb/leveldb_direct.cc|    if (status.ok() && options_.durable_close) status = FsyncFilesIn(path());||caught"
  "database install: fsync of the checkpoint directory after the rename|checkpoint/util/file_util.cc|  JG_RETURN_IF_ERROR(FsyncDir(to_parent));||survives"
)

unexpected=0
for mutation in "${mutations[@]}"; do
  IFS='|' read -r name file old new expected <<<"${mutation}"
  python3 - "${file}" "${old}" "${new}" <<'PY' || exit 2
import sys
path, old, new = sys.argv[1], sys.argv[2].replace('\\n', '\n'), sys.argv[3].replace('\\n', '\n')
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"mutation_proof: {old!r} occurs {text.count(old)} times in {path}")
open(path, 'w').write(text.replace(old, new))
PY
  log=$(mktemp)
  ./tools/bazel test //tests/power_loss:power_loss_test --test_output=errors \
    "$@" >"${log}" 2>&1
  status=$?
  git checkout -q -- "${file}"
  if [[ ${status} -eq 0 ]]; then
    echo "survived (expected: ${expected}): ${name} (${file})"
    [[ ${expected} == survives ]] || unexpected=$((unexpected + 1))
  else
    [[ ${expected} == caught ]] || unexpected=$((unexpected + 1))
    failed=$(grep -oE '^\[  FAILED  \] [^ ]+/[a-z0-9_]+,' "${log}" |
             sed -E 's|.*/([a-z0-9_]+),|\1|' | sort -u | tr '\n' ' ')
    first=$(grep -m1 -A3 -E '^tests/power_loss/power_loss_test.cc:[0-9]+: Failure' "${log}" |
            tail -n +2 | tr '\n' ' ' | cut -c1-300)
    echo "caught (expected: ${expected}): ${name} (${file}): failed in: ${failed:-build or other}; first: ${first}"
  fi
  rm -f "${log}"
done
if [[ ${unexpected} -ne 0 ]]; then
  echo "mutation_proof: ${unexpected} mutations did other than expected"
  exit 1
fi
echo "mutation_proof: every mutation did as expected"
