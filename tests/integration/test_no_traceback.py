"""No traceback, ever: every command, driven with malformed input, exits 2 with an ``error:`` line (issue 12 §1).

Two layers. A fixed corpus: every case the issue lists plus the obvious ones per command (bad numbers, wrong
types, missing / unreadable / wrong-kind paths, edited checkpoints). Then property-based cases (Hypothesis): random
JSON values put into a valid config.json for `plan`, random JSON edits of a real checkpoint for `predict`, and
random text for the flags of every command. The property is the same everywhere: the command returns 0 or 2, never
raises, never prints ``Traceback``; a 2 comes with an ``error:`` line.

Commands run in-process through ``gpukit.cli.main`` (an exception escaping it is what a traceback would be in a
real process); one subprocess checks the same on a real ``python -m gpukit``. serve, loadtest and deploy
are driven like the rest.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "train"))  # train_testdata: tiny image folders

LLAMA = {
    "model_type": "llama",
    "vocab_size": 1000,
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "tie_word_embeddings": False,
}
BENCH = ["--device", "cpu", "-b", "numpy", "--no-ceilings", "--no-save", "--budget", "0.1"]  # cheap if accepted
PROPERTY = settings(
    max_examples=int(os.environ.get("GPUKIT_FUZZ_EXAMPLES", "25")),
    deadline=None,
    derandomize=True,  # the same examples on every run: CI failures reproduce
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    raised: BaseException | None = None


def run(*argv: str) -> Outcome:
    """``gpukit.cli.main`` in-process with stdout/stderr captured; an escaping exception is recorded, not raised."""
    from gpukit.cli import main

    out, err = io.StringIO(), io.StringIO()
    raised: BaseException | None = None
    code = -1
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except BaseException as exc:  # anything escaping main is a traceback in a real process
            raised = exc
    return Outcome(code, out.getvalue(), err.getvalue(), raised)


def assert_clean(o: Outcome, allowed: tuple[int, ...] = (2,)) -> None:
    """Exit ``allowed`` (2: bad input), an ``error:`` line for a 2, and no traceback anywhere."""
    assert o.raised is None, f"raised {type(o.raised).__name__}: {o.raised}"
    text = o.out + o.err
    assert "Traceback" not in text, text[-2000:]
    assert o.code in allowed, f"exit {o.code}: {text[-1500:]}"
    if o.code == 2:
        assert any(line.startswith("error:") for line in o.err.splitlines()), o.err[-1500:]


# ---- what the corpus points at -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny image folder, a trained seed-CNN run folder (1 epoch on the CPU), and files of every wrong kind."""
    pytest.importorskip("torch")
    from train_testdata import make_folder

    from gpukit.train.config import TrainConfig
    from gpukit.train.loop import train

    root = tmp_path_factory.mktemp("ntb")
    data = make_folder(root / "data", per_class=6, size=16, junk=False)
    run_dir = root / "run"
    train(TrainConfig(data=data, out=run_dir, model="seed-cnn", epochs=1, batch_size=4, image_size=16, device="cpu",
                      min_steps=0))  # fmt: skip
    (root / "empty").mkdir()
    (root / "garbage.db").write_bytes(b"this is not an SQLite file" * 40)
    (root / "bad.json").write_text("{not json")
    (root / "list.json").write_text("[1, 2, 3]")
    (root / "notes.txt").write_text("not an image")
    (root / "prices.toml").write_text('[instance."x"]\ngpu = "h100-sxm"\ngpus = "many"\nusd_per_hour = 1\n')
    for key, text in (("hidden_size", "1" + "0" * 200), ("vocab_size", "9" * 5000)):
        cfg = json.dumps(LLAMA).replace(f'"{key}": {LLAMA[key]}', f'"{key}": {text}')
        (root / f"huge_{key}.json").write_text(cfg)
    return {"root": root, "data": data, "run": run_dir, "jpg": next(data.rglob("*.jpg"))}


def edited_run(env: dict[str, Path], name: str, edit: Callable[[dict[str, Any]], Any]) -> Path:
    """A copy of the trained run whose checkpoint JSON (last and best) went through ``edit``."""
    dst = env["root"] / f"edit-{name}"
    if not dst.exists():
        shutil.copytree(env["run"], dst)
        for stem in ("last", "best"):
            f = dst / f"{stem}.json"
            f.write_text(json.dumps(edit(json.loads(f.read_text()))))
    return dst


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: {**d, key: value}


# Edits of a checkpoint's JSON the issue lists: each must be refused as an edited/unusable checkpoint (exit 2).
CHECKPOINT_EDITS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "list": lambda d: [d],
    "tensors-file-int": _set("tensors_file", 5),
    "image-size-text": _set("image_size", "abc"),
    "image-size-mismatch": _set("image_size", 64),
    "model-vgg": _set("model", "vgg"),
    "model-mismatch": _set("model", "resnet18"),
    "classes-empty": _set("classes", []),
    "classes-three": _set("classes", ["a", "b", "c"]),
    "epoch-text": _set("epoch", "abc"),
    "history-bad": _set("history", [{"epoch": "x"}, 5]),
}


# ---- the fixed corpus ------------------------------------------------------------------------------------------


def corpus(e: dict[str, Path]) -> list[Any]:
    r, root, data = e["run"], e["root"], e["data"]
    empty, garbage = str(root / "empty"), str(root / "garbage.db")
    cases: list[Any] = [
        # info / doctor
        ("info", "--timeout", "abc"),
        ("info", "--timeout", "0"),
        ("info", "--bogus"),
        ("doctor", "--timeout", "-1"),
        ("doctor", "--timeout", "nan"),
        # bench
        ("bench", "vector-add", "--size", "abc", *BENCH),
        ("bench", "vector-add", "--size", "1e400GiB", *BENCH),
        ("bench", "vector-add", "--size", "-5", *BENCH),
        ("bench", "no-such-workload", *BENCH),
        ("bench", "vector-add", "--size", "1KiB", "--device", "tpu"),
        ("bench", "vector-add", "--size", "1KiB", "--tolerance", "abc", *BENCH),
        ("bench", "vector-add", "--size", "1KiB", "--db", empty, *BENCH[:5], "--budget", "0.1"),  # saves: no --no-save
        ("bench", "vector-add", "--size", "1KiB", "--workload", str(root / "nofile.py:f"), *BENCH),
        ("bench", "vector-add", "--size", "1KiB", "--baseline", "no-such-baseline", *BENCH),
        ("bench", "vector-add", "--size", "1KiB", "--markdown", empty, *BENCH),
        ("bench", "mandelbrot", "--size", "16x16x5", "--save-image", empty, *BENCH),
        ("bench", "vector-add", "--size", "1KiB", "--seed", "-1", *BENCH),
        ("bench", "vector-add", "--size", "1KiB", "--workload", f"{empty}:f", *BENCH),
        # history / report
        ("history", "--db", garbage),
        ("history", "--db", empty),
        ("history", "show", "abc"),
        ("history", "show", "999999", "--db", str(root / "new.db")),
        ("history", "compare", "1"),
        ("history", "--limit", "0"),
        ("report", "--format", "pdf"),
        ("report", "--db", garbage),
        ("report", "--db", str(root / "new2.db")),
        ("report", "--run", "1", "--last"),
        # plan (the overflow cases first)
        ("plan", str(root / "huge_hidden_size.json")),
        ("plan", str(root / "huge_vocab_size.json")),
        ("plan", str(root / "bad.json")),
        ("plan", str(root / "list.json")),
        ("plan", empty),
        ("plan", "no-such-preset"),
        ("plan", "llama-2-7b", "--gpus", "1000000000"),
        ("plan", "llama-2-7b", "--batch", "0"),
        ("plan", "llama-2-7b", "--tp", "3"),
        ("plan", "llama-2-7b", "--tokens", "1" + "0" * 400),
        ("plan", "llama-2-7b", "--tokens", "abc"),
        ("plan", "llama-2-7b", "--prices", str(root / "prices.toml")),
        ("plan", "llama-2-7b", "--prices", empty),
        ("plan", "llama-2-7b", "--gpu", "tpu-v5"),
        ("plan", "llama-2-7b", "--optimizer-impl", "magic"),
        ("plan", "llama-2-7b", "--image-size", "224"),
        ("plan", "resnet50", "--image-size", "0"),
        ("plan", "--params", "-7B"),
        ("plan", "--params", "7B", "llama-2-7b"),
        # train
        ("train", str(e["jpg"]), "--epochs", "1", "--device", "cpu"),
        ("train", str(root / "missing"), "--device", "cpu"),
        ("train", empty, "--device", "cpu"),
        ("train", str(data), "--epochs", "-1", "--device", "cpu"),
        ("train", str(data), "--batch-size", "0", "--device", "cpu"),
        ("train", str(data), "--image-size", "0", "--device", "cpu"),
        ("train", str(data), "--model", "vgg", "--device", "cpu"),
        ("train", str(data), "--device", "tpu"),
        ("train", str(data), "--val-fraction", "2", "--device", "cpu"),
        ("train", str(data), "--seed", "-1", "--epochs", "1", "--device", "cpu"),
        ("train", str(data), "--checkpoint-every-s", "-1", "--device", "cpu"),
        ("train", str(data), "--checkpoint-every-s", "nan", "--device", "cpu"),
        # predict / export
        ("predict", str(root / "missing"), str(data)),
        ("predict", str(r), str(root / "missing.jpg")),
        ("predict", str(r), empty),
        ("predict", str(r), str(data), "--batch-size", "0"),
        ("export", str(root / "missing"), "--onnx", str(root / "m.onnx")),
        ("export", str(r), "--onnx", empty),
        ("export", str(r), "--onnx", str(root / "m.onnx"), "--opset", "0"),
    ]
    return cases


def _corpus_ids() -> list[str]:
    fake = {k: Path(f"/{k}") for k in ("run", "root", "data", "jpg")}
    out = []
    for c in corpus(fake):
        argv = c.values[0] if hasattr(c, "values") else c
        out.append(" ".join(a.replace("/root/", "").replace("/", "") if a.startswith("/") else a for a in argv)[:60])
    return out


@pytest.mark.parametrize("index", range(len(_corpus_ids())), ids=_corpus_ids())
def test_corpus_exits_2_without_traceback(
    env: dict[str, Path], index: int, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `train` without --out makes runs/MODEL-TIME/checkpoints in the working directory before some of these cases
    # fail: in a temporary one, not the repository (issue 26)
    monkeypatch.chdir(tmp_path)
    case = corpus(env)[index]
    if hasattr(case, "values"):  # a pytest.param: apply its marks to this run
        for mark in case.marks:
            request.applymarker(mark)
        case = case.values[0]
    assert_clean(run(*case))


@pytest.mark.parametrize("edit", sorted(CHECKPOINT_EDITS))
@pytest.mark.parametrize(
    "command",
    # edited-checkpoint handling in predict and export is the train branch's part of issue 12
    ["predict", "export", "resume"],
)
def test_edited_checkpoint_is_refused(env: dict[str, Path], edit: str, command: str) -> None:
    run_dir = edited_run(env, edit, CHECKPOINT_EDITS[edit])
    assert_clean(run_command_on_checkpoint(env, command, run_dir))


def run_command_on_checkpoint(env: dict[str, Path], command: str, run_dir: Path) -> Outcome:
    if command == "predict":
        return run("predict", str(run_dir), str(env["jpg"]))
    if command == "export":
        return run("export", str(run_dir), "--onnx", str(run_dir / "m.onnx"))
    return run("train", str(env["data"]), "--out", str(run_dir), "--resume", "--epochs", "2", "--device", "cpu")


def test_serve_loadtest_deploy_bad_input(env: dict[str, Path]) -> None:
    """serve / loadtest / deploy get the same guarantee as every other command (bad input → exit 2, no traceback)."""
    from gpukit.cli.app import build_app

    app = build_app()
    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert names >= {"info", "doctor", "bench", "history", "report", "plan", "train", "predict", "export", "serve",
                     "loadtest", "deploy"}  # fmt: skip
    cases = [
        ("serve", str(env["root"] / "missing")),
        ("serve", str(env["run"]), "--port", "abc"),
        ("serve", str(env["run"]), "--max-batch", "0"),
        ("serve", str(env["run"]), "--max-body-mb", "-1"),
        ("loadtest", "not a url"),
        ("loadtest", "http://127.0.0.1:9", "--concurrency", "0"),
        ("loadtest", "http://example.com:80"),  # not loopback and not allowed by the user
        ("deploy", "k8s", str(env["root"] / "missing")),
        ("deploy", "k8s", str(env["run"]), "--image", "x", "--gpus", "-1", "--out", str(env["root"] / "k8s")),
    ]
    for argv in cases:
        assert_clean(run(*argv))


# ---- property-based ----------------------------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.integers(min_value=10**15, max_value=10**300),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@PROPERTY
@given(
    edits=st.dictionaries(
        st.sampled_from(
            [*LLAMA, "head_dim", "num_experts_per_tok", "num_local_experts", "attention_bias", "text_config", "n_embd"]
        ),
        JSON_VALUES,
        min_size=1,
        max_size=3,
    )
)
def test_any_config_json_plans_or_exits_2(tmp_path: Path, edits: dict[str, Any]) -> None:
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**LLAMA, **edits}))
    assert_clean(run("plan", str(f), "--json"), allowed=(0, 2))


PLAN_FLAGS = [
    "--batch",
    "--seq",
    "--gpus",
    "--tp",
    "--tokens",
    "--params",
    "--recipe",
    "--shard",
    "--dtype",
    "--prompt",
    "--new-tokens",
    "--optimizer",
    "--optimizer-impl",
    "--image-size",
    "--gpu",
    "--attn",
]
FLAG_TEXT = st.one_of(
    st.text(max_size=8),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "0", "-1", "7B", "1" + "0" * 5000, "0x10", "1_000"]),
)


@PROPERTY
@given(flag=st.sampled_from(PLAN_FLAGS), value=FLAG_TEXT, model=st.sampled_from(["gpt2", "seed-cnn", "mixtral-8x7b"]))
def test_any_plan_flag_value_plans_or_exits_2(flag: str, value: str, model: str) -> None:
    argv = ["plan", "--json", flag, value] + ([] if flag == "--params" else [model])
    assert_clean(run(*argv), allowed=(0, 2))


OTHER_FLAGS = [
    ("info", "--timeout"),
    ("doctor", "--timeout"),
    ("history", "--limit"),
    ("report", "--run"),
    ("report", "--format"),
]
# predict, export and bench: the same property (their fixes came with the train and engine branches).
OTHER_BRANCH_FLAGS = [
    ("predict", "--batch-size"),
    ("export", "--opset"),
    ("bench", "--size"),
    ("bench", "--tolerance"),
]


def _flag_argv(env: dict[str, Path], command: str, flag: str, value: str) -> list[str] | None:
    """The command line for one fuzzed flag value; None where an accepted value would start real work."""
    if command in ("info", "doctor"):
        try:  # only values the option refuses: an accepted one would run the probes (slow, and not bad input)
            if float(value) >= 1.0:
                return None
        except ValueError:
            pass
    db = str(env["root"] / "fuzz.db")
    return {
        "info": ["info", flag, value],
        "doctor": ["doctor", flag, value],
        "history": ["history", "--db", db, flag, value],
        "report": ["report", "--db", db, flag, value],
        "predict": ["predict", str(env["run"]), str(env["jpg"]), flag, value],
        "export": ["export", str(env["run"]), "--onnx", str(env["root"] / "f.onnx"), flag, value],
        "bench": ["bench", "vector-add", *BENCH, "--size", "1KiB", flag, value],
    }[command]


@PROPERTY
@given(which=st.sampled_from(OTHER_FLAGS), value=FLAG_TEXT)
def test_any_flag_value_of_other_commands_exits_0_or_2(
    env: dict[str, Path], which: tuple[str, str], value: str
) -> None:
    argv = _flag_argv(env, *which, value)
    if argv is not None:
        assert_clean(run(*argv), allowed=(0, 2))


@PROPERTY
@given(which=st.sampled_from(OTHER_BRANCH_FLAGS), value=FLAG_TEXT)
def test_any_flag_value_of_train_and_bench_exits_0_or_2(
    env: dict[str, Path], which: tuple[str, str], value: str
) -> None:
    argv = _flag_argv(env, *which, value)
    if argv is not None:
        assert_clean(run(*argv), allowed=(0, 2))


@PROPERTY
@given(
    edits=st.dictionaries(
        st.sampled_from(["model", "image_size", "classes", "epoch", "tensors_file", "history", "tensors_sha256"]),
        JSON_VALUES,
        min_size=1,
        max_size=2,
    )
)
def test_any_checkpoint_json_edit_predicts_or_exits_2(env: dict[str, Path], edits: dict[str, Any]) -> None:
    key = "-".join(sorted(edits)) + "-" + str(abs(hash(json.dumps(edits, sort_keys=True, default=str))))
    run_dir = edited_run(env, f"h{key}", lambda d: {**d, **edits})
    o = run("predict", str(run_dir), str(env["jpg"]))
    shutil.rmtree(run_dir, ignore_errors=True)
    assert_clean(o, allowed=(0, 2))


# ---- one real process ----------------------------------------------------------------------------------------------


def test_a_real_process_prints_error_and_hint_not_a_traceback(env: dict[str, Path]) -> None:
    envs = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "gpukit", "plan", str(env["root"] / "huge_vocab_size.json")],
        capture_output=True,
        text=True,
        timeout=120,
        env=envs,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.startswith("error:") and "\nhint:" in proc.stderr
