"""A hostile pass over the commands of the CLI (issue 25): empty, huge, negative, NaN, infinite and unicode
values, missing files, folders given as files, ``/dev/zero`` as input, unknown store schemes. Every one of them
must end in one line on stderr and exit 2 (bad input), never a traceback or exit 1 (README "Exit codes").

Placeholders: ``{dir}`` a folder, ``{store}`` a real store holding one monitor run, ``{missing}`` a path that
does not exist. The cases run in-process (``gpumatch.cli.app.main``), each in a fresh ``$GPUMATCH_HOME``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "traces" / "h200-2026-12-02-gemm-bf16.csv"
E = "estimate --model llama-3.1-8b --gpu h100"
P = "plan --model llama-3.1-8b --task infer"
HUGE = "99999999999999999999"

CASES = [
    # estimate: values
    f'{E} --count 0', f'{E} --count -1', f'{E} --count {HUGE}', f'{E} --count 1000000', f'{E} --batch nan',
    f'{E} --batch 0', f'{E} --batch -3', f'{E} --batch 1e300', f'{E} --prompt 0', f'{E} --prompt {HUGE}',
    f'{E} --gen -5', f'{E} --task nope', f'{E} --task serve --concurrency nan', f'{E} --task serve --concurrency 0',
    f'{E} --task serve --concurrency 1e12', f'{E} --task train --seq 0', f'{E} --tp 3', f'{E} --tp 0',
    f'{E} --precision fp7', f'{E} --price-basis weird', f'{E} --budget-usd nan',
    # estimate: names and files
    'estimate --model llama-3.1-8b --gpu ""', 'estimate --model "" --gpu h100', 'estimate --model ллама --gpu h100',
    'estimate --model llama-3.1-8b --gpu 💥', f'{E} --calibration /dev/zero', f'{E} --calibration {{dir}}',
    f'{E} --calibration {{missing}}', f'{E} --workload {{missing}}',
    # plan
    'plan {missing}', 'plan {dir}', 'plan /dev/zero', 'plan /dev/null', f'{P} --max-gpus 0', f'{P} --max-gpus -1',
    f'{P} --max-gpus {HUGE}', f'{P} --budget-usd nan', f'{P} --budget-usd -5', f'{P} --ttft-p50 nan',
    f'{P} --ttft-p50 0', f'{P} --gpus-per-node 0', f'{P} --top 0', f'{P} --role nope', f'{P} --psu-w inf',
    f'{P} --w-per-node -1', f'plan --model llama-3.1-8b --task serve --concurrency {HUGE}',
    # catalog
    'gpus show ""', 'gpus show 💥', 'gpus show ' + "x" * 5000, 'gpus list --format xml', 'models show ""',
    'models show --hf-config /dev/zero', 'models show --hf-config {dir}',
    # store
    'runs show abc --store {store}', 'runs show 1 --store {dir}', 'runs show 1 --store /dev/zero',
    'runs show 1 --store /dev/null', 'runs show 1 --store {missing}', f'runs show {HUGE} --store {{store}}',
    'runs list --limit 0 --store {store}', 'runs list --limit -1 --store {store}', 'runs list --store ""',
    'runs export 1 --output {dir} --store {store}', 'runs merge {store} --into {store}',
    'runs merge {missing} --into {dir}/new.sqlite', 'runs merge {dir} --into {dir}/new2.sqlite',
    'runs push --to {dir} --store {store}', 'runs push --to "" --store {store}',
    'runs push --to mysql://me@db/x --store {store}', 'runs merge {store} --into s3://bucket/x',
    'runs import /dev/zero --store {dir}/n.sqlite', 'runs import {dir} --store {dir}/n.sqlite',
    'runs check --store /dev/zero', 'runs recover --store {store} --output {dir}',
    # bench, calibrate, report
    'bench show 1 --store {store} --format xml', f'bench compare 1 {HUGE} --store {{store}}',
    'bench compare 1 2 --store {missing}', 'bench export 1 --out {dir} --store {store}',
    'calibrate --store {store} --out {dir}', 'calibrate --store /dev/zero', f'calibrate --run {HUGE}',
    'report --html {dir} --model llama-3.1-8b --task infer', f'report --run {HUGE}',
    # monitor, doctor, workload
    'monitor --replay /dev/zero --no-store', 'monitor --replay {dir} --no-store',
    'monitor --replay {missing} --no-store', 'monitor --replay {trace} --no-store --interval nan',
    'monitor --replay {trace} --no-store --interval -1', 'monitor --replay {trace} --no-store --interval inf',
    'monitor --replay {trace} --no-store --gpu 0', 'monitor --gpu -1 -- true', f'monitor --gpu {HUGE} -- true',
    'monitor --output {dir}/x.txt -- true', 'monitor --replay {trace} --no-store -o {dir}',
    'doctor --psu-w nan --no-torch --no-pcie-load', 'doctor --psu-w -5 --no-torch --no-pcie-load',
    'doctor --other-w 1e400 --no-torch --no-pcie-load', 'workload check /dev/zero', 'workload check {dir}',
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store with one monitor run (the replayed H200 trace)."""
    folder = tmp_path_factory.mktemp("store")
    path = folder / "results.sqlite"
    with pytest.MonkeyPatch.context() as mp:  # module scope: set up before the per-test isolated home
        mp.setenv("GPUMATCH_HOME", str(folder / "home"))
        mp.setenv("GPUMATCH_STORE", str(path))
        assert main(["monitor", "--replay", str(TRACE)]) == 0
    return path


def _argv(case: str, tmp_path: Path, store: Path) -> list[str]:
    import shlex

    folder = tmp_path / "a folder"
    folder.mkdir(exist_ok=True)
    words = shlex.split(case)
    subs = {"{dir}": str(folder), "{store}": str(store), "{missing}": str(tmp_path / "missing.toml"),
            "{trace}": str(TRACE)}
    out = []
    for w in words:
        for k, v in subs.items():
            w = w.replace(k, v)
        out.append(w)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[:60] for c in CASES])
def test_hostile_invocation_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, store: Path, case: str) -> None:
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(_argv(case, tmp_path, store))
    err = capsys.readouterr().err
    assert code == 2, f"exit {code}: {err}"
    assert err.count("\n") == 1 and err.startswith("gpumatch: error: ") and "Traceback" not in err, err
    assert "internal error" not in err
    assert not any(p.name.endswith(":") for p in tmp_path.rglob("*")), "a URL scheme became a folder"
