"""jobgraph_fuzzer: a libFuzzer target and the test that replays its corpus."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_test")

def jobgraph_fuzzer(name, srcs, deps, accepted, refused, min_files = 1):
    """Defines `name` (a fuzzer) and `name`_replay (its corpus as a test).

    With --config=fuzz, `name` links libFuzzer's main; otherwise it links
    fuzz_replay_main, so it still builds (with gcc) and replays files given
    to it. `name`_replay always links fuzz_replay_main and runs every file of
    corpus/`name`/ through the fuzzer once; it fails when one crashes, fails
    an invariant, when fewer than `min_files` files are found, or when the
    number of inputs that the code under test accepted or refused (as the
    harness notes with fuzz::NoteOutcome) is not exactly `accepted` and
    `refused`. Both must be at least 1: a corpus whose every input is
    accepted (or refused) never tests the other side of the code.

    Args:
      name: the fuzzer, "<thing>_fuzzer".
      srcs: its sources, defining LLVMFuzzerTestOneInput.
      deps: what they need.
      accepted: how many corpus inputs the code under test accepts.
      refused: how many it refuses with a clean error.
      min_files: the fewest corpus files the replay test accepts.
    """
    if accepted < 1 or refused < 1:
        fail("%s: the corpus must have both accepted and refused inputs " % name +
             "(accepted = %d, refused = %d)" % (accepted, refused))
    cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            ":fuzzing": [],
            "//conditions:default": [":fuzz_replay_main"],
        }),
    )
    cc_test(
        name = name + "_replay",
        size = "small",
        srcs = srcs,
        args = [
            "--min_files=%d" % min_files,
            "--accepted=%d" % accepted,
            "--refused=%d" % refused,
            # Relative to the test's runfiles directory, the workspace root.
            "%s/corpus/%s" % (native.package_name(), name),
        ],
        data = native.glob(["corpus/%s/**" % name]),
        deps = deps + [":fuzz_replay_main"],
    )
