#!/usr/bin/env bash
# Installs what the interop servers need on a fresh Debian machine, as root:
# grpcio and grpc_tools for the Python (C-core) server, and the locked npm
# packages of the Node (grpc-js) server. CI runs it before the tests;
# bridge/interop's tests skip without these (and fail when CI is set).
set -euo pipefail
cd "$(dirname "$0")"

pkgs=()
/usr/bin/python3 -c 'import grpc, grpc_tools.protoc' 2>/dev/null || pkgs+=(python3-grpcio python3-grpc-tools)
# the machines come with Node; Debian's (18 or later) does too
command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
if [ ${#pkgs[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${pkgs[@]}"
fi
# exactly the versions of package-lock.json; install scripts are not needed
(cd node && npm ci --ignore-scripts --no-audit --no-fund)
/usr/bin/python3 -c 'import grpc; print("grpcio", grpc.__version__)'
node -e 'console.log("@grpc/grpc-js", require("./node/node_modules/@grpc/grpc-js/package.json").version)'
