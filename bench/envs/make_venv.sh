# Sourced by the scripts beside it: make_venv NAME leaves $VENV as it is when `check` passes
# there, and otherwise creates it with $PYTHON, installs "${PINS[@]}" and runs `check` again.
make_venv() {
  if [ -x "$VENV/bin/python" ] && check; then
    echo "$1 venv ready: $VENV"
    exit 0
  fi
  echo "Creating the $1 venv at $VENV ..."
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet "${PINS[@]}"
  check
  echo "$1 venv ready: $VENV"
}
