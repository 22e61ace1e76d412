#!/usr/bin/env bash
# Exits 0 when PACKAGE holds a model exported in the format this checkout's exporter writes (the worker
# refuses older formats), 1 otherwise. Scripts that keep a generated package under build/ export it again then.
# Usage: scripts/package-is-current.sh PACKAGE
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
package="$1"
[ -f "$package/model.pt" ] && [ -f "$package/llmc-model.json" ] || exit 1
# The exporter writes the oldest version that has what a package's graph calls: from FORMAT_VERSION (a plain
# Llama-family graph) to MXFP4_FORMAT_VERSION.
versions=$(cd "$repo/tools" && /usr/bin/python3 -c \
  'from llmc_export.package import FORMAT_VERSION as a, MXFP4_FORMAT_VERSION as b; print("|".join(map(str, range(a, b + 1))))')
grep -Eq "\"format_version\": ($versions)," "$package/llmc-model.json"
