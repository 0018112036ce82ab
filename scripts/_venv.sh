# Sourced by scripts/*: create .venv (Python >= 3.11) and install gpumatch into it when needed.
# Usage: ensure_venv EXTRAS   (e.g. "" or "dev,bench")
#
# The stamp .venv/.gpumatch-installed holds the extras installed and the checksum of pyproject.toml
# ("bench,dev 637922632 3254"). A request is satisfied when the checksum matches and the extras it asks for
# are among those installed: ./scripts/test (dev,bench) satisfies ./scripts/gpumatch (none), so switching
# between them installs nothing. Otherwise it installs the union of both sets (an install never takes away
# what an earlier one put there) and records that union.

_gpumatch_extras() {  # "bench,dev" from "dev, bench,,dev": sorted, unique, no blanks
  printf '%s\n' "${1//,/$'\n'}" | tr -d ' ' | sed '/^$/d' | sort -u | paste -sd, -
}

_gpumatch_has_extras() {  # _gpumatch_has_extras HAVE WANT: every extra of WANT is in HAVE
  local e
  for e in ${2//,/ }; do
    [[ ",$1," == *",$e,"* ]] || return 1
  done
}

ensure_venv() {
  local extras root stamp sum have="" have_sum=""
  extras="$(_gpumatch_extras "$1")"
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  VENV="$root/.venv"
  stamp="$VENV/.gpumatch-installed"
  sum="$(cksum < "$root/pyproject.toml")"
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
    rm -f "$stamp"
  fi
  if [ -f "$stamp" ]; then
    local line
    line="$(head -n 1 "$stamp")"
    have="$(_gpumatch_extras "${line%% *}")"
    have_sum="${line#* }"
  fi
  if [ "$have_sum" = "$sum" ] && _gpumatch_has_extras "$have" "$extras"; then
    return 0
  fi
  local all
  all="$(_gpumatch_extras "$have,$extras")"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
  if [[ ",$all," == *",bench,"* ]]; then
    # the CPU build from local disk where it exists; any other torch pin pulls a multi-GB CUDA build
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==2.13.0" >&2
  fi
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$root${all:+[$all]}" >&2
  echo "$all $sum" > "$stamp"
}
