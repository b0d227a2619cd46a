#!/usr/bin/env bash
# Installs the Debian packages k3 needs to build, test and run. Idempotent:
# packages already present are skipped, and apt is only consulted when
# something is missing. Run as root (or with sudo) on Debian 12.
set -euo pipefail

PKGS=(
  build-essential pkg-config clang clang-format llvm
  libclang-rt-14-dev
  libjansson-dev libpcre2-dev libmicrohttpd-dev libedit-dev libssl-dev
  libopenmpi-dev openmpi-bin
  python3-numpy curl
  chromium
)
# node/npm: the machine image may ship NodeSource's nodejs (which bundles npm and
# conflicts with Debian's npm package); only fall back to Debian's when absent.
if ! command -v npm >/dev/null 2>&1; then PKGS+=(nodejs npm); fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
