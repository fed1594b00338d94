"""scripts/apt-deps.sh waits for another apt's lock and fails loudly under CI=true (issue 9, item 13).

apt-get, dpkg and id are replaced by small scripts on PATH, so the test changes nothing on the machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "apt-deps.sh"


def _fake_bin(tmp_path: Path, uid: int, lock_busy: int, install_ok: bool = True) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        "dpkg": "exit 1",  # every package is missing
        "id": f"echo {uid}",
        "apt-get": f"""echo "$@" >> {tmp_path}/calls
case "$*" in
  *" update "*|*" update") n=$(grep -c update {tmp_path}/calls)
     if [ "$n" -le {lock_busy} ]; then echo "E: Could not get lock /var/lib/apt/lists/lock" >&2; exit 100; fi ;;
  *install*) {"exit 0" if install_ok else "exit 100"} ;;
esac
exit 0""",
    }
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _run(tmp_path: Path, bin_dir: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "APT_LOCK_POLL": "0", "APT_LOCK_WAIT": "60"}
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)


def test_waits_for_a_held_apt_lock_then_installs(tmp_path):
    res = _run(tmp_path, _fake_bin(tmp_path, uid=0, lock_busy=2), ci=True)
    assert res.returncode == 0, res.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len([c for c in calls if "update" in c]) == 3 and "waiting for another apt" in res.stderr
    install = next(c for c in calls if "install" in c)
    assert "DPkg::Lock::Timeout=60" in install and "bubblewrap" in install


def test_a_failed_install_fails_under_ci_and_warns_elsewhere(tmp_path):
    bin_dir = _fake_bin(tmp_path, uid=0, lock_busy=0, install_ok=False)
    ci = _run(tmp_path, bin_dir, ci=True)
    assert ci.returncode == 1 and "error:" in ci.stderr and "CI=true" in ci.stderr
    local = _run(tmp_path, bin_dir, ci=False)
    assert local.returncode == 0 and "warning:" in local.stderr and "skipped" in local.stderr
