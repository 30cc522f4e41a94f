"""From mapped GPU time to shape weights and operator importance (pandas; no Django).

For applications a with card-hours C_a, total traced GPU time G_a (mapped and unmapped)
and GPU time g_{a,s} of shape s:

    weight(s)      = Σ_a C_a · g_{a,s} / G_a          (card-hours spent in s)
    importance(op) = Σ_{s of op} weight(s), normalised to sum to 1

so an application counts by its size, not by how long its trace is, and the unmapped
part of its time lowers every mapped shape's share instead of being spread over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# pandas is imported in the functions that build frames, not here: the traces admin
# imports this module, so at module level every Django process (django.setup() loads the
# admin) paid about 1.2 s for pandas (tests/test_startup_imports.py keeps it out).

COLUMNS = [
    "application",
    "operator",
    "shape_key",
    "init_kwargs",
    "input_kwargs",
    "calls",
    "time_us",
]


def trace_frame(
    *, mapped: Iterable[Mapping[str, Any]], unmapped: Iterable[Mapping[str, Any]]
) -> pd.DataFrame:
    """One frame of every row: mapped rows carry an operator and shape, unmapped rows have
    ``operator`` None (their time counts in the application's total only)."""
    import pandas as pd

    records = [{key: row.get(key) for key in COLUMNS} for row in mapped]
    records += [
        {
            "application": row["application"],
            "operator": None,
            "shape_key": None,
            "init_kwargs": None,
            "input_kwargs": None,
            "calls": row.get("calls", 0),
            "time_us": row["time_us"],
            "name": row.get("name"),
        }
        for row in unmapped
    ]
    frame = pd.DataFrame.from_records(records, columns=[*COLUMNS, "name"])
    frame["time_us"] = frame["time_us"].astype(float)
    frame["calls"] = frame["calls"].fillna(0).astype("int64")
    frame["mapped"] = frame["operator"].notna()
    return frame


def application_totals(frame: pd.DataFrame, card_hours: Mapping[str, float]) -> pd.DataFrame:
    """Per application: card-hours, total, mapped and unmapped time, coverage."""
    import pandas as pd

    totals = frame.groupby("application")["time_us"].sum().rename("total_us")
    mapped = frame[frame["mapped"]].groupby("application")["time_us"].sum().rename("mapped_us")
    table = pd.concat([totals, mapped], axis=1).fillna(0.0)
    table["unmapped_us"] = table["total_us"] - table["mapped_us"]
    table["coverage"] = table["mapped_us"] / table["total_us"].where(table["total_us"] > 0)
    table["card_hours"] = [float(card_hours.get(name, 0.0)) for name in table.index]
    return table.reset_index().sort_values("application", ignore_index=True)


def shape_weights(frame: pd.DataFrame, card_hours: Mapping[str, float]) -> pd.DataFrame:
    """Per (operator, shape): weight in card-hours, GPU time, calls, applications, share of
    the summed weight; sorted by weight, heaviest first."""
    import pandas as pd

    missing = sorted(set(frame["application"]) - set(card_hours))
    if missing:
        raise ValueError(f"no card-hours for application(s): {', '.join(missing)}")
    totals = frame.groupby("application")["time_us"].sum()
    mapped = frame[frame["mapped"]]
    columns = [
        "operator",
        "shape_key",
        "init_kwargs",
        "input_kwargs",
        "weight",
        "time_us",
        "calls",
        "applications",
        "share",
    ]
    if mapped.empty:
        return pd.DataFrame(columns=columns)
    per_app = mapped.groupby(["application", "operator", "shape_key"], as_index=False).agg(
        time_us=("time_us", "sum"),
        calls=("calls", "sum"),
        init_kwargs=("init_kwargs", "first"),
        input_kwargs=("input_kwargs", "first"),
    )
    app_total = per_app["application"].map(totals)
    app_hours = per_app["application"].map(lambda name: float(card_hours[name]))
    per_app["weight"] = (app_hours * per_app["time_us"] / app_total.where(app_total > 0)).fillna(
        0.0
    )
    table = per_app.groupby(["operator", "shape_key"], as_index=False).agg(
        weight=("weight", "sum"),
        time_us=("time_us", "sum"),
        calls=("calls", "sum"),
        init_kwargs=("init_kwargs", "first"),
        input_kwargs=("input_kwargs", "first"),
        applications=("application", lambda names: sorted(set(names))),
    )
    total_weight = table["weight"].sum()
    table["share"] = table["weight"] / total_weight if total_weight > 0 else 0.0
    table = table.sort_values(["weight", "operator", "shape_key"], ascending=[False, True, True])
    return table[columns].reset_index(drop=True)


def operator_importance(weights: pd.DataFrame) -> pd.DataFrame:
    """Per operator: weight (card-hours), importance (normalised), shapes, GPU time."""
    import pandas as pd

    if weights.empty:
        return pd.DataFrame(columns=["operator", "weight", "importance", "shapes", "time_us"])
    table = weights.groupby("operator", as_index=False).agg(
        weight=("weight", "sum"), shapes=("shape_key", "count"), time_us=("time_us", "sum")
    )
    total = table["weight"].sum()
    table["importance"] = table["weight"] / total if total > 0 else 0.0
    table = table.sort_values(["importance", "operator"], ascending=[False, True])
    return table[["operator", "weight", "importance", "shapes", "time_us"]].reset_index(drop=True)


def coverage_curve(weights: pd.DataFrame) -> pd.DataFrame:
    """Shapes by weight, heaviest first, with the cumulative share of the summed weight."""
    curve = weights[["operator", "shape_key", "weight"]].copy()
    total = curve["weight"].sum()
    curve["cumulative_share"] = curve["weight"].cumsum() / total if total > 0 else 0.0
    curve.insert(0, "rank", range(1, len(curve) + 1))
    return curve.reset_index(drop=True)


def time_by_operator(frame: pd.DataFrame) -> pd.DataFrame:
    """GPU time per (operator, application); unmapped time under operator "(unmapped)"."""
    import pandas as pd

    labelled = frame.assign(operator=frame["operator"].fillna("(unmapped)"))
    table = labelled.groupby(["operator", "application"], as_index=False)["time_us"].sum()
    order = table.groupby("operator")["time_us"].sum().sort_values(ascending=False).index
    table["operator"] = pd.Categorical(table["operator"], categories=list(order), ordered=True)
    return table.sort_values(["operator", "application"]).reset_index(drop=True)
