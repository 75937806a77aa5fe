#!/usr/bin/env bash
# Installs redis-server (and redis-cli) from Debian's packages when it is missing: the
# limitcore-redis tests, benchmarks and fleet example start their own servers on loopback.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
    echo "redis-deps.sh: $(redis-server --version)"
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
echo "redis-deps.sh: installing redis-server with apt-get" >&2
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q redis-server
# The package starts a system service; the tests never use it (they start their own).
echo "redis-deps.sh: $(redis-server --version)"
