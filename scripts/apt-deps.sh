#!/usr/bin/env bash
# Installs the Debian packages the tests need, only those missing; says clearly what could not be installed.
set -u
pkgs=(bubblewrap podman runc chromium fonts-dejavu-core fonts-liberation)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
  echo "warning: cannot install ${missing[*]} (not root, no sudo); tests that need them will be skipped" >&2
  exit 0
fi
SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
echo "installing Debian packages: ${missing[*]}"
$SUDO apt-get update -qq >/dev/null || echo "warning: apt-get update failed" >&2
if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; then
  echo "warning: apt-get install ${missing[*]} failed; tests that need them will be skipped" >&2
fi
exit 0
