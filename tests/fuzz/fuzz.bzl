"""jobgraph_fuzzer: a libFuzzer target and the test that replays its corpus."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_test")

def jobgraph_fuzzer(name, srcs, deps, min_files = 1):
    """Defines `name` (a fuzzer) and `name`_replay (its corpus as a test).

    With --config=fuzz, `name` links libFuzzer's main; otherwise it links
    fuzz_replay_main, so it still builds (with gcc) and replays files given
    to it. `name`_replay always links fuzz_replay_main and runs every file of
    corpus/`name`/ through the fuzzer once; it fails when one crashes, fails
    an invariant, or when fewer than `min_files` files are found.

    Args:
      name: the fuzzer, "<thing>_fuzzer".
      srcs: its sources, defining LLVMFuzzerTestOneInput.
      deps: what they need.
      min_files: the fewest corpus files the replay test accepts.
    """
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
            # Relative to the test's runfiles directory, the workspace root.
            "%s/corpus/%s" % (native.package_name(), name),
        ],
        data = native.glob(["corpus/%s/**" % name]),
        deps = deps + [":fuzz_replay_main"],
    )
