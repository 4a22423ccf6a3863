"""The settings are defined once, as MTLConfig's nested groups: every run setting is a context field (with its
description in Studio's schema), a flag of `mtl run` and `mtl demo`, an MTL_* variable and a value effective()
applies, all by its flat name; a new field in a group gets all four. Bad values from any of them are one error
line naming the setting as the user wrote it."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
import typer
from pydantic import BaseModel
from typer.testing import CliRunner

from mtl_graph.agent import AgentConfig

from mtl_graph.llm.scripted import ScriptedChatModel, load_action_script
from mtl_graph.cli import app
from mtl_graph.cli.options import flag_specs, parameter, parse_flags, with_run_settings
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.config import MTLConfig, effective
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.config.names import (RUN_SETTINGS, SETTINGS, MTLContext, RunOverrides, configured, make_config, merged,
                                   overrides_model, run_settings, value_of)
from mtl_graph.config.schema import LoopSettings, agent_config, non_none, settings_table
from mtl_graph.core.errors import SettingsError
from mtl_graph.config.environment import get_settings, settings_model
from mtl_graph.core.task import Task
from helpers.paths import ROOT, EXAMPLES

FIELDS = list(RUN_SETTINGS)
runner = CliRunner()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MTL_") and name.removeprefix("MTL_").split("__")[0].lower() in FIELDS:
            monkeypatch.delenv(name)


def sample(name: str) -> tuple[Any, list[str], dict[str, str]]:
    """A valid non-default value of a field: as a context value, as flags, as environment variables."""
    info = SETTINGS[name].info
    kind, flag, env = non_none(info.annotation), "--" + name.replace("_", "-"), f"MTL_{name.upper()}"
    default = info.get_default(call_default_factory=True)
    if kind is bool:
        return (not default, [flag if not default else f"--no-{flag[2:]}"], {env: str(not default).lower()})
    if get_origin(kind) is Literal:
        value = next(v for v in reversed(get_args(kind)) if v != default)
        return value, [flag, value], {env: value}
    if get_origin(kind) is list:
        return ["a", "b"], [flag, "a", flag, "b"], {env: '["a", "b"]'}
    if isinstance(kind, type) and issubclass(kind, BaseModel):  # model_options, retry: one flag per sub-field
        sub = next(sub for sub, sub_info in kind.model_fields.items() if non_none(sub_info.annotation) in (int, float))
        [spec] = [spec for spec in flag_specs(MTLContext) if spec.path == (name, sub)]
        return {sub: 4}, [spec.flags[0], "4"], {f"{env}__{sub.upper()}": "4"}
    floor = max((m.ge for m in info.metadata if hasattr(m, "ge")), default=0)  # e.g. observation_cap >= 200
    ceiling = min((m.le for m in info.metadata if hasattr(m, "le")), default=None)  # e.g. relevance_floor <= 1
    value = {int: max(4, floor + 1), float: 12.5 if ceiling is None else ceiling / 2, str: "team-x"}[kind]  # a model name and a namespace alike
    return value, [flag, str(value)], {env: str(value)}


probe = typer.Typer()


@probe.command()
@with_run_settings(from_env=True)
def show(run: Any = None) -> None:
    """Prints the run context it receives."""
    typer.echo(run.model_dump_json(exclude_none=True))


def test_every_field_is_covered_by_every_derivation() -> None:
    schema = build_mtl_graph(None, None).get_context_jsonschema()  # what Studio's assistant schema endpoint shows
    commands = typer.main.get_command(app).commands
    for nested in schema.get("$defs", {}).values():  # model_options' own fields are described too
        assert all(field["description"] for field in nested["properties"].values()), nested
    for name in FIELDS:
        assert schema["properties"][name]["description"], name
        assert schema["properties"][name].get("default") is None, name  # unset keeps the build-time value
        assert f"MTL_{name.upper()}" in {f"MTL_{f.upper()}" for f in settings_model(RunOverrides).model_fields}
        value_of(MTLConfig(), name)  # every flat name has its place in the nested config
    for command in ("run", "demo"):
        flags = {opt for param in commands[command].params for opt in (*param.opts, *param.secondary_opts)}
        for spec in flag_specs(MTLContext):
            assert set(spec.flags) <= flags, (command, spec.flags)
    old = {"--model", "-m", "--memory", "--k", "-k", "--online", "--no-online", "--hold-one-out", "--exclude-domain",
           "--re-retrieve", "--base-url", "--max-tokens", "--temperature", "--model-timeout", "--action-format",
           "--step-limit", "--time-limit"}
    assert old <= {opt for param in commands["run"].params for opt in (*param.opts, *param.secondary_opts)}


@pytest.mark.parametrize("name", FIELDS)
def test_a_setting_means_the_same_from_context_flags_and_environment(name: str) -> None:
    value, flags, env = sample(name)
    from_context = MTLContext(**{name: value}).model_dump(mode="json", exclude_none=True)
    by_flag = runner.invoke(probe, flags)
    by_env = runner.invoke(probe, [], env=env)
    assert by_flag.exit_code == 0 and by_env.exit_code == 0, (by_flag.output, by_env.output)
    assert json.loads(by_flag.output) == json.loads(by_env.output) == from_context
    applied = value_of(effective(MTLConfig(), {name: value}), name)
    expected = value_of(make_config(**{name: value}), name)
    assert applied == expected != value_of(MTLConfig(), name)


def test_flags_win_over_the_environment_field_by_field() -> None:
    out = runner.invoke(probe, ["--top-k", "5", "--max-tokens", "9"],
                        env={"MTL_TOP_K": "1", "MTL_STEP_LIMIT": "2", "MTL_MODEL_OPTIONS": '{"temperature": 0.1}'})
    assert json.loads(out.output) == {"top_k": 5, "step_limit": 2,
                                      "model_options": {"temperature": 0.1, "max_tokens": 9}}


def flag_values(param: inspect.Parameter, args: list[str]) -> dict:
    """What a one-flag command built from `param` receives for args."""
    def command(**values: Any) -> None:
        typer.echo(json.dumps(values))

    command.__signature__ = inspect.Signature([param])  # type: ignore[attr-defined]
    one = typer.Typer()
    one.command()(command)
    return json.loads(runner.invoke(one, args).output)


class LoopWithPause(LoopSettings):
    """The loop group with one more field, the way a new setting is added."""

    pause_before_judge: bool = False
    """Ask a person before the judge runs."""


class WithPause(MTLConfig):
    loop: LoopWithPause = LoopWithPause()  # type: ignore[assignment]


def test_a_new_field_gets_a_context_field_a_flag_an_env_variable_and_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "pause_before_judge" in run_settings(WithPause) and "pause_before_judge" not in RUN_SETTINGS
    context_model = overrides_model(run_settings(WithPause), "Ctx", "test", WithPause)
    field = context_model.model_fields["pause_before_judge"]
    assert field.default is None and field.description == "Ask a person before the judge runs."
    spec = next(s for s in flag_specs(context_model) if s.path == ("pause_before_judge",))
    assert spec.flags == ("--pause-before-judge",) and spec.help == field.description
    assert flag_values(parameter(spec), ["--no-pause-before-judge"]) == {"pause_before_judge": False}
    assert parse_flags([spec], {"pause_before_judge": True}, context_model).pause_before_judge is True
    monkeypatch.setenv("MTL_PAUSE_BEFORE_JUDGE", "true")
    assert settings_model(context_model)().pause_before_judge is True
    applied = configured(WithPause(), context_model(pause_before_judge=True).given())
    assert applied.loop.pause_before_judge is True and applied.loop.online is True  # the group's others kept
    assert value_of(applied, "pause_before_judge") is True


def test_two_fields_with_one_flat_name_are_refused() -> None:
    class Clash(LoopSettings):
        top_k: int = 1
        """A second top_k."""

    class Clashing(MTLConfig):
        loop: Clash = Clash()  # type: ignore[assignment]

    with pytest.raises(TypeError, match="two settings are named top_k: retrieval.top_k and loop.top_k"):
        settings_table(Clashing)


def test_the_config_is_nested_and_a_flat_name_in_it_says_where_it_lives() -> None:
    cfg = MTLConfig(retrieval={"top_k": 7}, agent={"step_limit": 4}, model={"name": "openai:x"})
    assert (cfg.retrieval.top_k, cfg.agent.step_limit, cfg.model.name) == (7, 4, "openai:x")
    assert cfg.retrieval.memory_type == "insight"  # a group given in part keeps its other defaults
    with pytest.raises(ValueError, match=r"top_k is in the retrieval group: MTLConfig\(retrieval=\{'top_k': ...\}\)"):
        MTLConfig(top_k=7)
    with pytest.raises(ValueError, match="model_options is in the model group"):
        MTLConfig(model_options={"temperature": 0})
    assert make_config(cfg, top_k=2, model_options={"temperature": 0}).retrieval.top_k == 2
    assert cfg.retrieval.top_k == 7  # the caller's config is never changed


def test_flat_names_cover_every_field_once() -> None:
    paths = [setting.path for setting in SETTINGS.values()]
    assert len(paths) == len(set(paths))
    groups = {top: info for top, info in MTLConfig.model_fields.items()}
    every = [(top, field) for top, info in groups.items()
             for field in getattr(non_none(info.annotation), "model_fields", {}) if top != "retry"] + [("retry",)]
    assert sorted(paths) == sorted(every)
    build_only = {name for name, setting in SETTINGS.items() if not setting.run}
    assert {"sandbox", "workspace_root", "run_log", "distill_formats", "lifecycle_settings"} <= build_only
    assert not build_only & set(MTLContext.model_fields)  # a run cannot name a build's setting
    with pytest.raises(SettingsError, match="unknown setting workspace_root"):
        MTLContext(workspace_root="/")


def test_a_foreign_context_dict_gives_only_our_settings() -> None:
    # an agent with MemoryTransferMiddleware has its own context: its keys are not ours to refuse, ours are checked
    assert effective(MTLConfig(), {"user_id": 7, "top_k": 1}).retrieval.top_k == 1
    with pytest.raises(SettingsError, match="invalid top_k 'x'"):
        effective(MTLConfig(), {"user_id": 7, "top_k": "x"})


def test_agent_config_takes_the_runs_agent_settings_over_the_agents_own() -> None:
    own = AgentConfig(command_timeout=5, step_limit=9)
    per_run = agent_config(effective(MTLConfig(), {"step_limit": 2, "wall_time_limit": 30}), own)
    assert (per_run.step_limit, per_run.wall_time_limit, per_run.command_timeout) == (2, 30, 5)
    assert agent_config(MTLConfig(), own) is own  # nothing set for the run: the agent as built


def scripted_graph(pool: MemoryPool, **config: Any) -> Any:
    script = load_action_script(EXAMPLES / "slugify" / "demo_script.json")
    return build_mtl_graph(ScriptedChatModel(responses=script), pool, memory_type="none", online=False, **config)


def test_the_agent_runs_with_the_runs_step_limit(tmp_path: Path) -> None:
    task = Task.from_dir(EXAMPLES / "slugify")
    with MemoryPool.open(":memory:") as pool:
        state = scripted_graph(pool, run_log=tmp_path / "runs.jsonl").invoke({"task": task},
                                                                          context={"step_limit": 1})
        assert state["trajectory"]["exit_status"] == "step_limit" and len(state["trajectory"]["steps"]) == 1
        full = scripted_graph(pool, run_log=tmp_path / "runs.jsonl").invoke({"task": task})
        assert full["trajectory"]["exit_status"] == "submitted" and full["verdict"]["status"] == "pass"
        built = scripted_graph(pool, run_log=tmp_path / "runs.jsonl", step_limit=1)  # a build-time default too
        assert built.invoke({"task": task})["trajectory"]["exit_status"] == "step_limit"
        again = built.invoke({"task": task}, context={"step_limit": 30})  # ... that a run can raise
        assert again["trajectory"]["exit_status"] == "submitted"


@pytest.mark.parametrize("context, says", [
    ({"top_k": "many"}, "invalid top_k 'many'"), ({"top_kk": 1}, "unknown setting top_kk (known: model,"),
    ({"step_limit": 0}, "invalid step_limit 0"), ({"model_options": {"temperature": 9}}, "model_options.temperature"),
    ({"model_options": {"base_urll": "x"}}, "unknown setting model_options.base_urll"),
    ({"exclude_domains": "math"}, "invalid exclude_domains 'math'"), ({"online": "perhaps"}, "invalid online"),
    ({"memory_type": "poem"}, "invalid memory_type 'poem'"), ({"retry": {"attempts": 10**9}}, "invalid retry.attempts"),
    ({"retry": {"attempts": 2, "jitter": 1}}, "unknown setting retry.jitter"), ({"agent": {"step_limit": 1}},
                                                                                 "unknown setting agent (known:"),
    ({"top_k": "x\n" * 5000}, "invalid top_k 'x\\nx"), ({"top_k": "9\n9"}, "invalid top_k '9\\n9'")])
def test_a_bad_context_is_one_line(context: dict, says: str, tmp_path: Path) -> None:
    with MemoryPool.open(":memory:") as pool, pytest.raises(SettingsError) as error:
        scripted_graph(pool, run_log=tmp_path / "runs.jsonl").invoke({"task": str(EXAMPLES / "slugify")},
                                                                    context=context)
    assert says in str(error.value) and "\n" not in str(error.value) and len(str(error.value)) < 500
    assert not (tmp_path / "runs.jsonl").exists()  # refused before the run started: nothing to log


@pytest.mark.parametrize("env, says", [
    ({"MTL_TOP_K": "many"}, "invalid MTL_TOP_K 'many'"), ({"MTL_STEP_LIMIT": "0"}, "invalid MTL_STEP_LIMIT '0'"),
    ({"MTL_ONLINE": "perhaps"}, "invalid MTL_ONLINE 'perhaps'"),
    ({"MTL_MODEL_OPTIONS__TEMPERATURE": "9"}, "invalid MTL_MODEL_OPTIONS__TEMPERATURE"),
    ({"MTL_MODEL_OPTIONS": "{not json"}, "MTL_MODEL_OPTIONS"),
    ({"MTL_EXCLUDE_DOMAINS": "math"}, "invalid MTL_EXCLUDE_DOMAINS 'math'")])
def test_a_bad_environment_variable_is_one_line(env: dict, says: str) -> None:
    for args in (["memories", "stats", "--pool", ":memory:"], ["run", str(EXAMPLES / "slugify")]):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 1 and says in result.output, result.output
        assert result.output.count("\n") == 1 and result.output.startswith("error: environment:")
    with pytest.raises(SettingsError):
        os.environ.update(env)
        try:
            get_settings()
        finally:
            for name in env:
                del os.environ[name]


@pytest.mark.parametrize("flags, says", [
    (["--top-k", "many"], "invalid --top-k 'many'"), (["-k", "99"], "invalid --top-k '99'"),
    (["--step-limit", "0"], "invalid --step-limit '0'"), (["--temperature", "9"], "invalid --temperature '9'"),
    (["--model-timeout", "-1"], "invalid --model-timeout '-1'"), (["--time-limit", "0"], "invalid --time-limit '0'"),
    (["--memory", "poem"], "invalid --memory 'poem'"), (["--action-format", "smoke"], "invalid --action-format")])
def test_a_bad_flag_is_one_line(flags: list[str], says: str, tmp_path: Path) -> None:
    for command in (["run", str(EXAMPLES / "slugify"), "--model", "scripted:x.json", "--pool", str(tmp_path / "p")],
                    ["demo", "--pool", str(tmp_path / "p")]):
        result = runner.invoke(app, [*command, *flags])
        assert result.exit_code == 1 and says in result.output, result.output
        assert result.output.count("\n") == 1
    assert not (tmp_path / "p").exists()  # refused before anything was opened


def test_the_evaluation_shares_its_run_settings_with_every_run(tmp_path: Path) -> None:
    from mtl_graph.bench.graph_runner import GraphRunner
    from mtl_graph.bench.records import Condition

    script = load_action_script(EXAMPLES / "slugify" / "demo_script.json")
    graph_runner = GraphRunner(lambda task: ScriptedChatModel(responses=script), context={"step_limit": 1},
                               run_log=tmp_path / "runs.jsonl")
    outcome = graph_runner.run(Task.from_dir(EXAMPLES / "slugify"), Condition(), 0, None)
    assert outcome.trajectory.exit_status == "step_limit" and len(outcome.trajectory.steps) == 1

    eval_params = typer.main.get_command(app).commands["eval"].params
    opts = [opt for param in eval_params for opt in (*param.opts, *param.secondary_opts)]
    assert len(opts) == len(set(opts)) and {"--step-limit", "--base-url", "--re-retrieve"} <= set(opts)
    assert "--memory" not in opts and "--hold-one-out" not in opts  # the protocol sets those per condition
    bad = runner.invoke(app, ["eval", "--suites", "humaneval", "--out", str(tmp_path / "out"), "--agent", "oracle",
                              "--step-limit", "0"])
    assert bad.exit_code == 1
    assert bad.output == "error: invalid --step-limit '0': input should be greater than or equal to 1\n"
    assert not (tmp_path / "out").exists()


def test_the_studio_graph_takes_its_defaults_from_the_environment(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import runpy

    studio_graph = ROOT / "graphs" / "mtl.py"
    script = EXAMPLES / "slugify" / "demo_script.json"
    for name, value in {"MTL_STEP_LIMIT": "1", "MTL_MEMORY_TYPE": "none", "MTL_ONLINE": "false",
                        "MTL_MODEL": f"scripted:{script}", "MTL_RUN_LOG": str(tmp_path / "runs.jsonl")}.items():
        monkeypatch.setenv(name, value)
    graph = runpy.run_path(str(studio_graph))["graph"]
    state = graph.invoke({"task": str(EXAMPLES / "slugify")})
    assert state["trajectory"]["exit_status"] == "step_limit" and state["new_memory_ids"] == []
    assert graph.invoke({"task": str(EXAMPLES / "slugify")}, context={"step_limit": 30})["verdict"]["status"] == "pass"
    monkeypatch.setenv("MTL_TOP_K", "lots")
    with pytest.raises(SettingsError, match="^environment: invalid MTL_TOP_K 'lots'"):
        runpy.run_path(str(studio_graph))  # the server shows this line when the graph fails to load


@pytest.mark.parametrize("flags, env", [(["--step-limit", "1"], {}), ([], {"MTL_STEP_LIMIT": "1"}),
                                        (["--step-limit", "1"], {"MTL_STEP_LIMIT": "30"})])
def test_mtl_run_hands_the_agent_its_settings(flags: list[str], env: dict, tmp_path: Path) -> None:
    script = EXAMPLES / "slugify" / "demo_script.json"
    result = runner.invoke(app, ["run", str(EXAMPLES / "slugify"), "--model", f"scripted:{script}", "--memory", "none",
                                 "--no-online", "--pool", ":memory:", "--json", *flags],
                           env={**env, "MTL_RUN_LOG": str(tmp_path / "runs.jsonl")})
    assert result.exit_code == 0, result.output
    [record] = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert record["exit_status"] == "step_limit" and len(record["steps"]) == 1
    assert json.loads(result.output)["verdict"]["status"] == "fail"


def test_a_remote_run_sends_only_the_settings_given_as_json() -> None:
    from mtl_graph.bench.graph_runner import run_context

    shared = MTLContext(model="openai:x", step_limit=3, model_options={"temperature": 0.1})
    sent = json.loads(json.dumps(run_context(None, shared).model_dump(mode="json", exclude_none=True)))
    assert sent == {"model": "openai:x", "memory_type": "none", "online": False, "hold_one_out": False,
                    "lifecycle": "off", "step_limit": 3, "model_options": {"temperature": 0.1}}
    assert MTLContext(**sent).given() == run_context(None, shared).given()  # what the server rebuilds from it


def test_a_context_merges_into_the_nested_config_field_by_field() -> None:
    built = make_config(MTLConfig(retrieval={"memory_type": "workflow"}, retry={"max_delay": 5}),
                        model_options={"temperature": 0.2}, step_limit=9)
    run = effective(built, {"top_k": 1, "retry": {"attempts": 2}, "model_options": {"max_tokens": 64}})
    assert (run.retrieval.top_k, run.retrieval.memory_type, run.agent.step_limit) == (1, "workflow", 9)
    assert (run.retry.attempts, run.retry.max_delay) == (2, 5)  # a settings model given in part keeps the rest
    assert (run.model.options.temperature, run.model.options.max_tokens) == (0.2, 64)
    own = AgentConfig(retry={"initial_delay": 0.5})
    per_run = agent_config(run, own)
    assert (per_run.retry.attempts, per_run.retry.max_delay, per_run.retry.initial_delay) == (2, 5, 0.5)
    assert per_run.step_limit == 9
    assert built.retrieval.top_k == 3 and built.retry.attempts == 3  # the build's config is never changed


BUILD_ONLY_VALUES = {"sandbox": "local", "workspace_root": "/", "keep_workspaces": True, "run_log": "/etc/x.jsonl",
                     "distill_formats": ["insight"], "observation_chars": 10_000, "plan_max_chars": 100_000,
                     "lifecycle_settings": {"relevance_floor": -1.0}}


def test_every_build_only_setting_is_listed_here() -> None:
    assert set(BUILD_ONLY_VALUES) == {name for name, setting in SETTINGS.items() if not setting.run}


@pytest.mark.parametrize("name", sorted(BUILD_ONLY_VALUES))
def test_a_run_cannot_set_what_only_the_build_chooses(name: str, tmp_path: Path) -> None:
    # a client of a served graph must not pick the sandbox, where workspaces go or what is logged where
    with MemoryPool.open(":memory:") as pool, pytest.raises(SettingsError, match=f"unknown setting {name} "):
        scripted_graph(pool, run_log=tmp_path / "runs.jsonl").invoke({"task": str(EXAMPLES / "slugify")},
                                                                    context={name: BUILD_ONLY_VALUES[name]})
    assert not (tmp_path / "runs.jsonl").exists()
    assert value_of(make_config(**{name: BUILD_ONLY_VALUES[name]}), name) is not None  # the build may
