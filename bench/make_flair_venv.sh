#!/usr/bin/env bash
# Builds the venv bench/flair_peer.py runs flair 0.15.1 in (default .cache/flair_venv, or $1):
# torch 2.13.0 first (pip takes the CPU wheel it finds locally), then flair 0.15.1, which must keep that torch.
#
#     bash bench/make_flair_venv.sh [VENV]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO/.cache/flair_venv}"
PY="$VENV/bin/python"
if [ -f "$VENV/.elmo_tasks_flair_ready" ]; then
    echo "flair venv ready: $PY"
    exit 0
fi
echo "creating the flair venv at $VENV (once, a few minutes)"
python3 -m venv "$VENV"
PIP=("$PY" -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" flair==0.15.1
TORCH="$("$PY" -c 'import torch; print(torch.__version__)')"
case "$TORCH" in
    2.13.0*) ;;
    *) echo "error: installing flair replaced torch 2.13.0 by $TORCH in $VENV; remove $VENV and retry" >&2; exit 1 ;;
esac
HF_HUB_OFFLINE=1 "$PY" -c 'from flair.embeddings import TransformerWordEmbeddings' \
    || { echo "error: flair does not import in $VENV; remove $VENV and retry" >&2; exit 1; }
touch "$VENV/.elmo_tasks_flair_ready"
echo "flair venv ready: $PY (torch $TORCH, flair $("$PY" -c 'import flair; print(flair.__version__)'))"
