"""``--env-arg KEY=VALUE`` / ``--env-config FILE`` parsing and checking (issue 9, item 7)."""

from __future__ import annotations

import pytest

from rubricgym.core.envargs import EnvArgError, env_kwargs, parse_env_args


def test_values_are_json_or_strings_and_pairs_override_the_config(tmp_path):
    cfg = tmp_path / "env.yaml"
    cfg.write_text("n_docs: 2000\ndifficulty: easy\n")
    got = parse_env_args(["difficulty=hard", "corpus=docs/", "hops=3", 'limits={"cpu_s": 5}', "flag=true"], cfg)
    assert got == {
        "n_docs": 2000,
        "difficulty": "hard",
        "corpus": "docs/",
        "hops": 3,
        "limits": {"cpu_s": 5},
        "flag": True,
    }
    toml = tmp_path / "env.toml"
    toml.write_text('corpus = "docs"\nn_docs = 10\n')
    assert parse_env_args([], toml) == {"corpus": "docs", "n_docs": 10}


@pytest.mark.parametrize("pairs, match", [(["nokey"], "KEY=VALUE"), (["=3"], "KEY=VALUE"), (["a b=1"], "KEY=VALUE")])
def test_malformed_pairs_say_how_to_write_them(pairs, match):
    with pytest.raises(EnvArgError, match=match):
        parse_env_args(pairs)


def test_bad_config_files_are_named(tmp_path):
    with pytest.raises(EnvArgError, match="no such env config"):
        parse_env_args([], tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(EnvArgError, match=r"bad.yaml: an env config must be a mapping"):
        parse_env_args([], bad)


def test_unknown_arguments_fail_early_listing_what_the_env_takes():
    assert env_kwargs("deepsearch-v0", ["n_docs=300"]) == {"n_docs": 300}
    with pytest.raises(EnvArgError, match=r"takes no argument 'n_doc'.*n_docs"):
        env_kwargs("deepsearch-v0", ["n_doc=300"])
