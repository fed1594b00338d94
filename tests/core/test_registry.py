import gymnasium
import pytest

import rubricgym
from rubricgym.core.registry import EnvSpec, register, unregister
from rubricgym.envs.toy.calculator import CalculatorEnv


def test_unknown_env_lists_close_matches():
    with pytest.raises(KeyError, match="Did you mean: toy-calculator-v0"):
        rubricgym.make("toy-calculater-v0")


def test_register_make_and_gymnasium_twin():
    try:
        spec = register("my-calc-v1", "rubricgym.envs.toy.calculator:CalculatorEnv", kwargs={"max_ops": 1})
        assert spec.gym_id == "rubricgym/MyCalc-v1"
        env = rubricgym.make("my-calc-v1")
        assert isinstance(env, CalculatorEnv) and env.max_ops == 1
        assert rubricgym.make("my-calc-v1", max_steps=3).max_steps == 3
        assert isinstance(gymnasium.make("rubricgym/MyCalc-v1").unwrapped, CalculatorEnv)
        assert "my-calc-v1" in [s.id for s in rubricgym.list_envs()]
        with pytest.raises(ValueError, match="already registered"):
            register("my-calc-v1", CalculatorEnv)
    finally:
        unregister("my-calc-v1")
    assert "my-calc-v1" not in [s.id for s in rubricgym.list_envs()]


def test_bad_ids_and_entry_points_fail_clearly():
    with pytest.raises(ValueError, match="end in a version"):
        register("NoVersion", CalculatorEnv)
    register("broken-v0", "rubricgym.envs.toy:Nope")
    try:
        with pytest.raises(ImportError, match="cannot load entry point"):
            rubricgym.make("broken-v0")
    finally:
        unregister("broken-v0")


def test_make_group_gives_independent_copies_of_one_task():
    task = rubricgym.make("toy-calculator-v0").task_set(1, seed=2)[0]
    envs = rubricgym.make_group("toy-calculator-v0", task, 3)
    assert len({id(e) for e in envs}) == 3
    assert all(e.state().task_id == task.id for e in envs)
    envs[0].step("junk")
    assert [e.state().step_count for e in envs] == [1, 0, 0]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Install a one-env plugin module as the only ``rubricgym.envs`` entry point and reset discovery; the env
    and module are removed afterwards. ``plugin(module, env_id, delay_s=0)``."""
    import importlib.metadata as md
    import sys

    from rubricgym.core import registry

    made: list[tuple[str, str]] = []

    def install(module: str, env_id: str, delay_s: float = 0.0) -> None:
        (tmp_path / f"{module}.py").write_text(
            "import time\n"
            "from rubricgym import register\n"
            "def plugin():\n"
            f"    time.sleep({delay_s})\n"
            f"    register({env_id!r}, 'rubricgym.envs.toy.calculator:CalculatorEnv', replace=True)\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        ep = md.EntryPoint(name=module, value=f"{module}:plugin", group="rubricgym.envs")
        real = md.entry_points
        monkeypatch.setattr(
            md, "entry_points", lambda **kw: [ep] if kw.get("group") == "rubricgym.envs" else real(**kw)
        )
        monkeypatch.setattr(registry._REGISTRY, "discovered", False)
        made.append((module, env_id))

    yield install
    for module, env_id in made:
        unregister(env_id)
        sys.modules.pop(module, None)


def test_entry_point_plugins_are_discovered(plugin):
    plugin("thirdparty_env", "thirdparty-calc-v0")
    assert "thirdparty-calc-v0" in [s.id for s in rubricgym.list_envs()]


def test_threads_looking_up_envs_during_plugin_discovery_wait_for_it(plugin):
    """A server or a thread pool may make envs from several threads at start-up: none may see the registry
    half-discovered (a slow plugin's env missing)."""
    import threading

    from rubricgym.core import registry

    plugin("slow_plugin_env", "slow-plugin-calc-v0", delay_s=0.5)
    found: list[str] = []

    def look() -> None:
        try:
            found.append(registry.spec("slow-plugin-calc-v0").id)
        except KeyError as e:
            found.append(f"missing: {e}")

    threads = [threading.Thread(target=look) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert found == ["slow-plugin-calc-v0"] * 4


def test_prefix_ids_resolve_through_their_handler_and_missing_families_say_what_to_install(monkeypatch):
    from rubricgym.core import registry

    monkeypatch.setattr(registry._REGISTRY, "prefixes", {"toy:": "tests.core.test_registry:_toy_spec"})
    monkeypatch.setattr(registry._REGISTRY, "hints", {"extra-": "Install the extra: pip install 'x[extra]'."})
    assert registry.spec("toy:anything").id == "toy:anything"
    with pytest.raises(KeyError, match=r"pip install 'x\[extra\]'"):
        registry.spec("extra-page-v0")
    with pytest.raises(ValueError, match="ending in ':'"):
        registry.register_id_prefix("toy", "m:f")


def _toy_spec(env_id: str) -> EnvSpec:
    return EnvSpec(id=env_id, entry_point="rubricgym.envs.toy.calculator:CalculatorEnv")
