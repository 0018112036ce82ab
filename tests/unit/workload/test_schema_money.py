"""Money fields of a workload file: every price, electricity price and budget is a finite number above 0 and
below a typo's ceiling, rejected with the field named (exit 2 through the CLI); price_basis and the purchase
price overrides reach the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.errors import DataFileError
from gpumatch.plan.request import from_workload
from gpumatch.workload import load_workload

HEAD = 'task = "serve"\nmodel = "llama-3.2-3b"\n[money]\n'

BAD = [
    ('usd_per_gpu_hour = { "H100 SXM" = -2.0 }', "money.usd_per_gpu_hour.H100 SXM"),
    ('usd_per_gpu_hour = { "H100 SXM" = 0 }', "money.usd_per_gpu_hour.H100 SXM"),
    ('usd_per_gpu_hour = { "H100 SXM" = "$-2/h" }', "money.usd_per_gpu_hour.H100 SXM"),
    ('usd_per_gpu_hour = { "H100 SXM" = nan }', "money.usd_per_gpu_hour.H100 SXM"),
    ('usd_per_gpu_hour = { "H100 SXM" = inf }', "money.usd_per_gpu_hour.H100 SXM"),
    ('usd_per_gpu_hour = { "H100 SXM" = 1e300 }', "money.usd_per_gpu_hour.H100 SXM"),
    ('usd_per_gpu_hour = { "H100 SXM" = 2, "h100-sxm5-80gb" = 3 }', "money.usd_per_gpu_hour"),
    ('purchase_usd_per_gpu = { "L40S" = -1 }', "money.purchase_usd_per_gpu.L40S"),
    ('purchase_usd_per_gpu = { "L40S" = 0 }', "money.purchase_usd_per_gpu.L40S"),
    ('purchase_usd_per_gpu = { "Voodoo 5" = 100 }', "money.purchase_usd_per_gpu.Voodoo 5"),
    ("electricity_usd_per_kwh = -0.1", "money.electricity_usd_per_kwh"),
    ("electricity_usd_per_kwh = 0", "money.electricity_usd_per_kwh"),
    ("electricity_usd_per_kwh = nan", "money.electricity_usd_per_kwh"),
    ('electricity_usd_per_kwh = "$-1/kWh"', "money.electricity_usd_per_kwh"),
    ("purchase_budget_usd = 0", "money.purchase_budget_usd"),
    ('purchase_budget_usd = "$-5k"', "money.purchase_budget_usd"),
    ("purchase_budget_usd = inf", "money.purchase_budget_usd"),
    ("purchase_budget_usd = 1e300", "money.purchase_budget_usd"),
    ('price_basis = "cheapest"', "money.price_basis"),
]


@pytest.mark.parametrize(("line", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_money_field_is_one_line_naming_it(tmp_path: Path, line: str, field: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.toml"
    path.write_text(HEAD + line + "\n", encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        load_workload(path)
    assert f"field '{field}" in str(info.value) and "\n" not in str(info.value)
    assert main(["plan", str(path), "--format", "json"]) == 2
    assert field in capsys.readouterr().err


def test_price_basis_and_overrides_reach_the_plan_request(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(HEAD + 'price_basis = "purchase"\npurchase_usd_per_gpu = { "l40s" = 7500 }\n'
                    'usd_per_gpu_hour = { "L4" = "$0.5/h" }\n', encoding="utf-8")
    req = from_workload(load_workload(path))
    assert req.price_basis == "purchase"
    assert req.purchase_usd_per_gpu == {"L40S": 7500.0} and req.usd_per_gpu_hour == {"L4": 0.5}


def test_default_basis_is_on_demand(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(HEAD, encoding="utf-8")
    assert load_workload(path).money.price_basis == "on-demand"
