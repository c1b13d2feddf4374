#!/usr/bin/env bash
# Builds the qcc Python package (pyproject.toml: the extension modules of
# python/ with scikit-build-core) and installs it into .venv. Assumes setup.sh
# ran. The build goes to build-python/ with build.sh's compilers and ccache
# base, so that it reuses the objects scripts/build.sh compiled (about half a
# minute after build.sh, instead of a second full build).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CC="${CC:-cc}" CXX="${CXX:-c++}"
.venv/bin/pip install --disable-pip-version-check --no-build-isolation -q .
