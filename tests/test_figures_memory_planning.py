"""The memory-planning figure (experiments.memory_planning): on two small workloads with exact
byte counts, its rows agree with the graphs they come from (no reuse is every tensor's bytes,
sharing is the peak of live bytes), its derived columns with their definitions, its tables
with its rows, and the figure draws from the table alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from figure_checks import jsonish, stored_points
from matplotlib.figure import Figure

import tmsim
from experiments import conventional, memory_planning
from experiments.common import read_data
from tmsim.figures import points_dir
from tmsim.workload.zoo import MODELS

SMALL = memory_planning.Config(workloads=(("vgg19", 4), ("resnet50", 2)), alignment_bytes=1)
SCHEMES = ["no-reuse", "in-place", "shared", "shared+in-place"]
POOLS = ["pool_first_fit_bytes", "pool_best_fit_bytes", "pool_first_fit_start_bytes"]


@pytest.fixture(scope="module")
def computed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return memory_planning.compute(SMALL, tmp_path_factory.mktemp("memory_planning"))


def test_rows_agree_with_the_graphs(computed: Path) -> None:
    frame, meta = read_data(computed)
    assert meta["figure"] == "memory_planning"
    assert meta["config"] == jsonish(SMALL)
    assert meta["provenance"]["solver"] == "none"  # nothing here is solved
    assert list(frame["workload"]) == ["VGG19 b4"] * 4 + ["ResNet-50 b2"] * 4
    assert list(frame["scheme"]) == SCHEMES * 2
    for (model, batch), rows in zip(SMALL.workloads, (frame.iloc[:4], frame.iloc[4:]), strict=True):
        g = tmsim.graph(model, batch=batch)
        bound = dict(zip(rows["scheme"], rows["bound_bytes"], strict=True))
        assert bound["no-reuse"] == int(g.sizes_bytes.sum())
        assert bound["shared"] == g.peak_live_bytes == int(rows["footprint_bytes"].iloc[0])
        assert bound["shared+in-place"] <= bound["shared"] < bound["in-place"] < bound["no-reuse"]
        assert (rows["kernels"] == len(g.kernels)).all()
        assert (rows["tensors"] == len(g.tensors)).all()
    # every ReLU forward and backward, and the loss's two kernels (vgg19 has 18 ReLUs)
    assert (frame.loc[frame["model"] == "vgg19", "in_place_pairs"] == 2 * 18 + 2).all()


def test_derived_columns_follow_their_definitions(computed: Path) -> None:
    frame, _ = read_data(computed)
    for _, row in frame.iterrows():
        pools = [int(row[c]) for c in POOLS]
        assert row["best_pool_bytes"] == min(pools)
        assert row["pool_tags_bytes"] >= row["bound_bytes"]
        assert min(pools) >= row["bound_bytes"]
        assert row["fragmentation"] == pytest.approx(1 - row["bound_bytes"] / min(pools))
        assert row["tags_fragmentation"] == pytest.approx(
            1 - row["bound_bytes"] / row["pool_tags_bytes"]
        )
        strategy = memory_planning.pool_column(row["best_allocator"])
        assert row[strategy] == row["best_pool_bytes"]
    plain = frame[frame["scheme"].isin(["no-reuse", "in-place"])]
    for c in [*POOLS, "pool_tags_bytes"]:  # nothing is shared: every allocator stacks them
        assert (plain[c] == plain["bound_bytes"]).all()
    no_reuse = frame.groupby("workload", sort=False)["bound_bytes"].transform("first")
    assert frame["saving_vs_no_reuse"].tolist() == pytest.approx(
        (1 - frame["bound_bytes"] / no_reuse).tolist()
    )


def test_a_second_compute_reuses_every_point(computed: Path) -> None:
    before = stored_points(computed.parent, "memory_planning")
    assert len(before) == 2
    memory_planning.compute(SMALL, computed.parent)
    assert stored_points(computed.parent, "memory_planning") == before


def test_the_tables_and_the_figure_come_from_the_data(computed: Path, tmp_path: Path) -> None:
    files = memory_planning.plot(computed, tmp_path)
    assert sorted(p.name for p in files) == [
        "memory_planning.md",
        "memory_planning.pdf",
        "memory_planning.png",
    ]
    assert all(p.stat().st_size > 1000 for p in files)
    frame = tmsim.read_table(computed)
    table = memory_planning.model_table(frame, "VGG19 b4")
    assert list(table["scheme"]) == SCHEMES
    rows = frame[frame["workload"] == "VGG19 b4"]
    assert table["bound GB"].tolist() == pytest.approx((rows["bound_bytes"] / 1e9).tolist())
    assert table["lecture's tags GB"].tolist() == pytest.approx(
        (rows["pool_tags_bytes"] / 1e9).tolist()
    )
    text = (tmp_path / "memory_planning.md").read_text(encoding="utf-8")
    assert text.count("\n## ") == 2 and "## ResNet-50 b2" in text
    best = rows[rows["scheme"] == "shared+in-place"].iloc[0]
    assert f"| shared+in-place | {best['buffers']} | {best['bound_bytes'] / 1e9:.3f} |" in text
    # through the public API, on a figure of its own and on three Axes given
    assert len(tmsim.figure("memory_planning", frame).axes) == 3
    mine = Figure()
    axes = list(mine.subplots(3, 1))
    assert tmsim.figure("memory_planning", frame, ax=axes) is mine
    assert all(a.patches for a in axes)
    with pytest.raises(tmsim.TmsimError, match="draws 3 panel"):
        tmsim.figure("memory_planning", frame, ax=list(Figure().subplots(1, 2)))


def test_a_bad_alignment_is_refused_before_any_point_runs(tmp_path: Path) -> None:
    for bad in (0, -64, True):
        with pytest.raises(tmsim.TmsimError, match="alignment_bytes"):
            memory_planning.compute(memory_planning.Config(alignment_bytes=bad), tmp_path)
    assert not points_dir(tmp_path, "memory_planning").exists()


def test_the_full_figure_covers_the_zoo_at_the_paper_batches() -> None:
    full, quick = memory_planning.Config(), memory_planning.QUICK
    assert sorted(m for m, _ in full.workloads) == sorted(MODELS)  # the CNNs
    batches = dict(full.workloads)
    for model, batch in conventional.Config().workloads:
        assert batches[model] == batch
    assert full.alignment_bytes == 64
    assert len(quick.workloads) < len(full.workloads)
    assert all(b <= batches[m] for m, b in quick.workloads)
