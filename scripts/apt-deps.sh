#!/usr/bin/env bash
# Installs the Debian packages the tests need, only those missing; says clearly what could not be installed.
# Another apt/dpkg process holding the lock (unattended-upgrades, a parallel install) is waited for, up to
# APT_LOCK_WAIT seconds (default 600). Under CI=true anything that cannot be installed is an error (exit 1);
# elsewhere it is a warning and the tests that need it skip with the reason.
set -u
pkgs=(bubblewrap podman runc chromium chromium-headless-shell fonts-dejavu-core fonts-liberation)
wait_s="${APT_LOCK_WAIT:-600}"
ci=0; case "${CI:-}" in 1|true|TRUE|True|yes) ci=1 ;; esac
problem() {  # a warning outside CI, an error under CI=true
  if [ "$ci" = 1 ]; then echo "error: $1 (CI=true: the tests need them)" >&2; exit 1; fi
  echo "warning: $1; tests that need them will be skipped" >&2
  exit 0
}
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then
  problem "cannot install ${missing[*]} (not root, no sudo)"
fi
SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
apt_wait=(-o "DPkg::Lock::Timeout=$wait_s")
# apt-get update takes the lists lock, which DPkg::Lock::Timeout does not cover on every apt: retry while it is held
update_ok=0
deadline=$(( $(date +%s) + wait_s ))
while :; do
  out=$($SUDO apt-get "${apt_wait[@]}" update -qq 2>&1) && { update_ok=1; break; }
  case "$out" in *"Could not get lock"*|*"is held by process"*) ;; *) break ;; esac
  [ "$(date +%s)" -ge "$deadline" ] && break
  echo "waiting for another apt process to release its lock..." >&2
  sleep "${APT_LOCK_POLL:-5}"
done
[ "$update_ok" = 1 ] || echo "warning: apt-get update failed: ${out:-}" >&2
echo "installing Debian packages: ${missing[*]}"
if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_wait[@]}" install -y -qq "${missing[@]}" >/dev/null; then
  problem "apt-get install ${missing[*]} failed"
fi
exit 0
