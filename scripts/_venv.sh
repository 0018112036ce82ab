# Sourced by scripts/*: create .venv (Python >= 3.11) and install gpumatch into it when needed.
# Usage: ensure_venv EXTRAS   (e.g. "" or "dev,bench")
ensure_venv() {
  local extras="$1" root stamp want
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  VENV="$root/.venv"
  stamp="$VENV/.gpumatch-installed"
  want="$extras $(cat "$root/pyproject.toml" | cksum)"
  if [ ! -x "$VENV/bin/python" ]; then
    local py=""
    for c in python3.13 python3.12 python3.11 python3; do
      # pyenv shims exist for versions that are not installed; their complaint is not ours to print
      if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        py="$c"; break
      fi
    done
    [ -n "$py" ] || { echo "gpumatch needs Python >= 3.11 (none found on PATH)" >&2; exit 2; }
    "$py" -m venv "$VENV"
  fi
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
    if [[ "$extras" == *bench* ]]; then
      # the CPU build from local disk where it exists; any other torch pin pulls a multi-GB CUDA build
      "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==2.13.0" >&2
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$root${extras:+[$extras]}" >&2
    echo "$want" > "$stamp"
  fi
}
