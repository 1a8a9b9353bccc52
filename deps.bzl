"""The external repositories jobgraph needs, defined without any download.

jobgraph's own WORKSPACE and every workspace that uses jobgraph call the same
macro:

    local_repository(
        name = "jobgraph",
        path = "/path/to/jobgraph",
    )

    load("@jobgraph//:deps.bzl", "jobgraph_deps")

    jobgraph_deps()

Everything comes from this source tree or from Debian packages (see
tools/offline_repos/README.md), so the build stays offline wherever the
calling WORKSPACE is.
"""

# A relative label in a .bzl file names its own repository: "@jobgraph" from a
# consumer, the main repository inside jobgraph itself.
load("//tools/offline_repos:system_libs.bzl", "system_libs")

# Any file at the root of the jobgraph source tree. Label() resolves it in
# this file's repository, so the rule below finds jobgraph's files whatever
# directory the calling WORKSPACE is in and whatever the consumer named the
# jobgraph repository.
_JOBGRAPH_ROOT_FILE = Label("//:deps.bzl")

def _jobgraph_dir_repository_impl(ctx):
    root = ctx.path(ctx.attr._root_file).dirname
    src = root
    for part in ctx.attr.dir.split("/"):
        src = src.get_child(part)
    if not src.exists:
        fail(("jobgraph_dir_repository(name = \"%s\"): %s does not exist. " +
              "It is part of jobgraph's source tree (%s); restore it with " +
              "`git checkout -- %s` there.") %
             (ctx.name, src, root, ctx.attr.dir))

    # Symlinks, not copies: an edit to the folder shows up without a refetch.
    # The folder's own WORKSPACE names the repository for jobgraph's use; a
    # fresh one carries the name this repository was given.
    for child in src.readdir():
        if child.basename not in ("WORKSPACE", "WORKSPACE.bazel"):
            ctx.symlink(child, child.basename)
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)

jobgraph_dir_repository = repository_rule(
    implementation = _jobgraph_dir_repository_impl,
    attrs = {
        "dir": attr.string(
            mandatory = True,
            doc = "The folder, relative to jobgraph's root, whose contents " +
                  "become the repository (e.g. \"tools/offline_repos/rules_cc\").",
        ),
        "_root_file": attr.label(
            default = _JOBGRAPH_ROOT_FILE,
            allow_single_file = True,
        ),
    },
    # Re-run on each fetch: the rule only makes symlinks, and the folder's
    # list of files may change.
    local = True,
    doc = "A repository made of one folder of jobgraph's source tree. " +
          "Unlike local_repository, whose path is relative to the calling " +
          "WORKSPACE, it finds the folder wherever jobgraph lives.",
)

def jobgraph_deps():
    """Defines the repositories jobgraph's BUILD files and Bazel 4 need.

    Call it from the WORKSPACE after the local_repository for jobgraph. It
    defines, unless the WORKSPACE already defined a repository of that name:

      rules_cc               tools/offline_repos/rules_cc (native C++ rules
                             under @rules_cc's names)
      remote_coverage_tools  tools/offline_repos/remote_coverage_tools
      rules_java             Debian's bazel-rules-java, /usr/share/bazel/rules/java
      system_libs            Debian's Abseil, protobuf, LevelDB, glog, gflags,
                             GoogleTest and Google Benchmark as cc_library
                             targets (@system_libs//:absl, ...)

    The names are fixed: jobgraph's BUILD files say @system_libs//:absl and
    load @rules_cc//cc:defs.bzl. The Debian packages must be installed
    (jobgraph's ./tools/bazel lists and installs them).
    """
    if not native.existing_rule("rules_cc"):
        jobgraph_dir_repository(
            name = "rules_cc",
            dir = "tools/offline_repos/rules_cc",
        )
    if not native.existing_rule("remote_coverage_tools"):
        jobgraph_dir_repository(
            name = "remote_coverage_tools",
            dir = "tools/offline_repos/remote_coverage_tools",
        )
    if not native.existing_rule("rules_java"):
        native.local_repository(
            name = "rules_java",
            path = "/usr/share/bazel/rules/java",
        )
    if not native.existing_rule("system_libs"):
        system_libs(name = "system_libs")
