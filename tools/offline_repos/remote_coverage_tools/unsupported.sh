#!/bin/sh
echo "bazel coverage is not available in jobgraph's offline build" >&2
exit 1
