"""`rubricgym init` (issue 30): names that cannot be a package are refused with the name to use, the scaffold's
files are complete, and the round trip works as a user runs it: init, build a wheel, install it (into a private
folder, never the shared venv), `rubricgym envs` lists the env, `check` passes, `run --agent oracle` solves its
tasks, `serve` answers over HTTP, and the generated tests pass."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.scaffold import FAMILIES, Names, ScaffoldError, init_package, plan
from tests.conftest import missing_dependency

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


# ---- names and files ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, says",
    [
        ("My Env", "e.g. 'my-env'"),
        ("price_check", "e.g. 'price-check'"),
        ("9lives", "e.g. 'env-9lives'"),
        ("price-check-v1", "give 'price-check' for the env id 'price-check-v1'"),
        ("json", "shadows a Python module"),
        ("rubricgym", "shadows rubricgym"),
        ("class", "shadows a Python module"),
    ],
)
def test_a_name_that_cannot_be_a_package_says_what_to_write(name, says):
    with pytest.raises(ScaffoldError) as e:
        Names.of(name)
    assert says in str(e.value)


def test_names_follow_from_the_package_name():
    n = Names.of("price-check")
    assert (n.env_id, n.package, n.class_name, n.title) == (
        "price-check-v0",
        "price_check",
        "PriceCheckEnv",
        "Price check",
    )
    assert Names.of("web-shop", "web").env_id == "web-shop-v0" and Names.of("shop", "web").env_id == "web-shop-v0"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_renders_completely_with_the_packaging_files(family):
    files = plan("demo-env", family)
    pkg = "demo_env"
    env_id = Names.of("demo-env", family).env_id
    assert {"pyproject.toml", "README.md", "Dockerfile", "tests/test_env.py", f"{pkg}/__init__.py"} <= set(files)
    if family == "tools":  # checks read typed step records, never Step.info keys
        assert "step_records = RECORDS" in files[f"{pkg}/env.py"] and ".info.get(" not in files[f"{pkg}/checks.py"]
    assert not [p for p, text in files.items() if "{{" in text and p.endswith((".py", ".toml", ".yaml", "Dockerfile"))]
    pyproject = files["pyproject.toml"]
    assert '[project.entry-points."rubricgym.envs"]' in pyproject and f'demo-env = "{pkg}:register"' in pyproject
    docker = files["Dockerfile"].splitlines()
    assert docker[docker.index("FROM python:3.11-slim") + 1 :][-4:] == [
        "USER rubricgym",
        "EXPOSE 8000",
        'ENTRYPOINT ["rubricgym"]',
        f'CMD ["serve", "{env_id}", "--host", "0.0.0.0", "--port", "8000"]',
    ]
    assert "RUN pip install --find-links wheels '.[server]'" in files["Dockerfile"]
    assert ("chromium" in files["Dockerfile"]) == (family == "web")
    readme = files["README.md"]
    assert "twine upload dist/*" in readme and "pip wheel --no-deps -w dist ." in readme and env_id in readme
    if family == "tools":
        rubric = files[f"{pkg}/rubric.yaml"]
        assert "level: essential" in rubric and "level: pitfall" in rubric and "applies_if:" in rubric
        assert files[f"{pkg}/env.py"].count("@tool(") == 2


def test_init_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "taken" / "x").mkdir(parents=True)
    with pytest.raises(ScaffoldError, match="already exists and is not empty"):
        init_package("taken", "tools", tmp_path)


def test_the_cli_writes_the_package_and_says_what_to_run_next(tmp_path):
    r = runner.invoke(app, ["init", "price-check", "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "pip install -e '.[server,test]' && pytest" in r.output and "rubricgym check price-check-v0" in r.output
    assert (tmp_path / "price-check" / "price_check" / "env.py").is_file()
    bad = runner.invoke(app, ["init", "x", "--family", "gym", "--dir", str(tmp_path)])
    assert bad.exit_code == 2 and "choose one of tools, web, corpus" in bad.output
    bad = runner.invoke(app, ["init", "Price Check", "--dir", str(tmp_path)])
    assert bad.exit_code == 2 and "'price-check'" in bad.output


# ---- the round trip -----------------------------------------------------------------------------------------


def _env(site: Path, cache: Path) -> dict[str, str]:
    """Subprocess environment: the installed package's folder (its entry point) before this tree."""
    return {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "RUBRICGYM_CACHE": str(cache)}


def _sh(*args: str | Path, env: dict[str, str], cwd: Path | None = None, timeout: float = 600) -> str:
    done = subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def _build_and_install(tmp_path: Path, name: str, family: str) -> tuple[Path, dict[str, str]]:
    """``rubricgym init``, a wheel of the result, and that wheel installed into a private folder."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    env = _env(site, cache)
    _sh(sys.executable, "-m", "rubricgym", "init", name, "--family", family, "--dir", tmp_path, env=env)
    pkg = tmp_path / name
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    _sh(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", pkg, env=env)
    wheels = sorted((tmp_path / "dist").glob("*.whl"))
    assert len(wheels) == 1, wheels
    _sh(*pip, "install", "--no-deps", "--target", site, wheels[0], env=env)
    assert (site / Names.of(name).package / "__init__.py").is_file()
    return pkg, env


def _serve_and_step(env_id: str, env: dict[str, str], action: str) -> dict:
    """``rubricgym serve`` on a free loopback port: /health, a seeded reset and one step over HTTP, then Ctrl-C."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rubricgym", "serve", env_id, "--port", "0", "--log-level", "warning"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"serving {env_id} at ws://127.0.0.1:"), line + (
            proc.stderr.read() if proc.stderr else ""
        )
        url = line.split("HTTP ")[1].rstrip(")\n")
        with httpx.Client(base_url=url, trust_env=False, timeout=60) as http:
            assert http.get("/health").json()["status"] == "healthy"
            reset = http.post("/reset", json={"seed": 0}).json()
            step = http.post("/step", json={"action": {"text": action}, "session_id": reset["session_id"]}).json()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    return {"reset": reset, "step": step}


@pytest.mark.slow
def test_the_tools_scaffold_round_trip(tmp_path):
    t0 = time.perf_counter()
    pkg, env = _build_and_install(tmp_path, "price-check", "tools")
    env_id = "price-check-v0"
    listed = json.loads(_sh(sys.executable, "-m", "rubricgym", "envs", "--json", env=env))
    mine = next(row for row in listed if row["id"] == env_id)
    assert mine["stages"] == ["lookup", "answer"] and mine["agents"] == ["oracle", "random"]
    check = _sh(sys.executable, "-m", "rubricgym", "check", env_id, "--fuzz", "50", env=env)
    assert "FAIL" not in check and "leak audit" in check and "shortcut battery" in check
    passed_check = time.perf_counter() - t0
    out = tmp_path / "runs" / "oracle"
    _sh(sys.executable, "-m", "rubricgym", "run", env_id, "--agent", "oracle", "--tasks", "3", "--out", out, env=env)
    trajs = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 3 and all(t["outcome"]["reward"] == 1.0 for t in trajs)
    served = _serve_and_step(env_id, env, '<tool_call>{"name": "price", "arguments": {"item": "apple"}}</tool_call>')
    assert served["reset"]["observation"]["stage"] == "lookup"
    assert served["step"]["observation"]["text"].startswith("One apple costs ") and served["step"]["done"] is False
    tests = _sh(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", env=env, cwd=pkg)
    assert "4 passed" in tests, tests
    _sh(sys.executable, "-m", "ruff", "check", pkg, env=env, cwd=pkg)  # the generated code is lint-clean
    _sh(sys.executable, "-m", "ruff", "format", "--check", pkg, env=env, cwd=pkg)
    print(f"init -> wheel -> install -> passing check: {passed_check:.1f} s")


@pytest.mark.slow
def test_the_corpus_scaffold_round_trip(tmp_path):
    pkg, env = _build_and_install(tmp_path, "local-docs", "corpus")
    assert (tmp_path / "site" / "local_docs" / "docs" / "brook.md").is_file()  # the corpus ships in the wheel
    tests = _sh(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", env=env, cwd=pkg)
    assert "4 passed" in tests, tests


@pytest.mark.slow
def test_the_web_scaffold_round_trip(tmp_path):
    from rubricgym.envs.gui.pool import browser_available

    if missing := browser_available():
        missing_dependency(f"the web scaffold's tests drive Chromium: {missing}")
    pkg, env = _build_and_install(tmp_path, "sum-page", "web")
    assert (tmp_path / "site" / "sum_page" / "page" / "index.html").is_file()  # the page ships in the wheel
    listed = json.loads(_sh(sys.executable, "-m", "rubricgym", "envs", "--json", env=env))
    assert "web-sum-page-v0" in [row["id"] for row in listed]
    tests = _sh(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", env=env, cwd=pkg)
    assert "4 passed" in tests, tests


def test_the_scaffold_passes_openenv_validate(tmp_path):
    """``openenv validate`` (OpenEnv 0.10) reads the scaffold's ``openenv.yaml``: the manifest passes, and nothing
    fails (the image-building runtime checks are skipped with --skip-build)."""
    root = init_package("price-check", "tools", tmp_path)
    assert (root / "openenv.yaml").is_file()
    openenv = Path(sys.executable).with_name("openenv")
    done = subprocess.run(
        [str(openenv), "validate", str(root), "--skip-build", "--json"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    statuses = {r["check_id"]: r["status"] for r in report["results"]}
    assert statuses["static.manifest"] == "pass" and "fail" not in statuses.values()
