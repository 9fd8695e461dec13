#!/usr/bin/env bash
# One entry point for a fresh Debian machine with Python 3.11:
#   ./dev.sh demo    install what is missing, then run the NaN -> STOP demo
#   ./dev.sh test    install what is missing, then lint, type-check and run the whole test suite
#   ./dev.sh bench   install what is missing, then run the benchmarks under bench/
#   ./dev.sh frameworks   install only the conformance suite's framework venvs (tests/conformance)
# Installs (only where missing): python3-venv, redis-server, tmux, openssh-server (apt-get), a .venv, and
# for tests/conformance .venv-frameworks and .venv-hf4 (the real frameworks, torch==2.13.0 CPU).
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '==> %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else say "need root for: $* (install it by hand, or run as root)"; exit 1
  fi
}

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    say "apt-get update"
    as_root apt-get update -qq
    apt_updated=1
  fi
  say "installing $* with apt-get"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

need_command() {  # need_command BINARY PACKAGE
  command -v "$1" >/dev/null 2>&1 || apt_install "$2"
}

pick_python() {
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
  say "Python >= 3.11 not found; on Debian: apt-get install python3"; exit 1
}

ensure_venv() {
  local py
  py=$(pick_python)
  if [ ! -x .venv/bin/python ]; then
    say "creating .venv with $py"
    if ! "$py" -m venv .venv 2>/dev/null; then
      rm -rf .venv
      apt_install python3-venv "$(basename "$py")-venv" 2>/dev/null || apt_install python3-venv
      "$py" -m venv .venv
    fi
  fi
  local stamp
  # Strict editable mode: the installed package is a tree of links to the checkout's files, which a type
  # checker resolves as trainwarden.events etc.; a new module needs a reinstall, so the stamp covers them.
  stamp=$( { cat pyproject.toml setup.py
             find trainwarden events agent policies workers bot remote archive core sdk ops -name '*.py' | sort; } | sha256sum | cut -d' ' -f1)
  if [ ! -f .venv/.dev-stamp ] || [ "$(cat .venv/.dev-stamp)" != "$stamp" ]; then
    say "installing trainwarden and its test tools into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[test]' --config-settings editable_mode=strict
    echo "$stamp" > .venv/.dev-stamp
  fi
}

ensure_services() {
  need_command redis-server redis-server
  need_command tmux tmux
  [ -x /usr/sbin/sshd ] || command -v sshd >/dev/null 2>&1 || apt_install openssh-server  # remote-run tests
}

# The conformance suite's frameworks, each venv built only when missing or when its pinned requirements
# change (the stamp). torch goes first and exactly (torch==2.13.0: the CPU wheel in /opt/wheels; a CUDA
# build or another version downloads gigabytes), then the rest with torch held to it. A failed install
# leaves no stamp and does not stop the other tests: tests/conformance then fails (CI) or skips (locally),
# naming the install log.
ensure_framework_venv() {  # ensure_framework_venv DIR REQUIREMENTS
  local dir=$1 req=$2 py stamp start
  stamp=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -f "$dir/.fw-stamp" ] && [ "$(cat "$dir/.fw-stamp")" = "$stamp" ]; then return 0; fi
  start=$(date +%s)
  py=$(pick_python)
  rm -rf "$dir"
  "$py" -m venv "$dir" &&
    "$dir/bin/python" -m pip install -q torch==2.13.0 &&
    "$dir/bin/python" -c 'import sys, torch; sys.exit(torch.version.cuda is not None)' &&
    "$dir/bin/python" -m pip install -q -r "$req" -c <(echo torch==2.13.0) || return 1
  echo $(( $(date +%s) - start )) > "$dir/.fw-install-seconds"
  echo "$stamp" > "$dir/.fw-stamp"
}

ensure_frameworks() {
  local pids=() dir failed=""
  for dir in .venv-frameworks .venv-hf4; do
    local req=tests/conformance/requirements.txt
    [ "$dir" = .venv-hf4 ] && req=tests/conformance/requirements-hf4.txt
    if [ -f "$dir/.fw-stamp" ] && [ "$(cat "$dir/.fw-stamp")" = "$(sha256sum "$req" | cut -d' ' -f1)" ]; then
      continue
    fi
    say "installing the conformance frameworks ($req) into $dir (log: $dir.install.log)"
    ensure_framework_venv "$dir" "$req" >"$dir.install.log" 2>&1 &
    pids+=("$!:$dir")
  done
  local entry
  for entry in "${pids[@]}"; do
    wait "${entry%%:*}" || { failed=1; say "WARNING: ${entry#*:} did not install (${entry#*:}.install.log); tests/conformance will fail in CI"; }
  done
  [ -z "$failed" ]
}

usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }  # the header comment

COMMANDS="demo test bench frameworks help"
unknown_command() {  # unknown_command WORD: say so, with the command most like it (difflib, as the CLI does)
  local meant=""
  meant=$(python3 -c 'import difflib, sys; print(*difflib.get_close_matches(sys.argv[1], sys.argv[2:], n=1))' \
          "$1" $COMMANDS 2>/dev/null) || meant=""
  if [ -n "$meant" ]; then
    printf "dev.sh: unknown command '%s'; did you mean '%s'?\n" "$1" "$meant" >&2
  else
    printf "dev.sh: unknown command '%s'\n" "$1" >&2
  fi
}

cmd=${1:-help}
shift || true
case "$cmd" in
  demo)
    ensure_services; ensure_venv
    status=0; .venv/bin/trainwarden demo "$@" || status=$?
    say "trainwarden is installed in .venv: '. .venv/bin/activate' puts it on your PATH (README: Quick start)"
    exit "$status" ;;
  test)
    ensure_services; ensure_venv
    ensure_frameworks || true  # tests/conformance says what is missing
    say "ruff"
    .venv/bin/ruff check .
    .venv/bin/ruff format --check .
    say "mypy"
    (cd .venv && bin/python -m mypy --config-file ../pyproject.toml)  # not from here: ./trainwarden would shadow the install
    say "pytest"
    exec .venv/bin/python -m pytest "$@" ;;
  bench)
    ensure_services; ensure_venv
    for script in bench/*.py; do
      case "$script" in bench/harness.py|bench/*kit.py) continue ;; esac  # modules the benchmarks import
      say "$script"
      .venv/bin/python "$script" "$@"
    done ;;
  frameworks)
    ensure_frameworks ;;
  help|-h|--help)
    usage ;;
  *)
    unknown_command "$cmd"
    usage >&2
    exit 2 ;;
esac
