"""Result tables with their provenance (tmsim.results); ``tmsim reproduce`` is tested in
test_cli_reproduce.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tmsim.errors import TmsimError
from tmsim.results import ResultFileError, git_commit, provenance, read_table, write_table


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_tables_round_trip_with_their_metadata(tmp_path: Path, suffix: str) -> None:
    frame = pd.DataFrame({"model": ["a", "b"], "slowdown": [1.0, 2.5], "kernels": [3, 4]})
    meta = {"config": {"ratio": "4:1", "batch": [1, 2]}, "provenance": provenance(seed=7)}
    path = write_table(frame, tmp_path / f"t{suffix}", meta)
    back, got = read_table(path)
    pd.testing.assert_frame_equal(back, frame)
    assert got == meta
    assert got["provenance"]["seed"] == 7
    assert not list(tmp_path.glob(".*.tmp"))  # nothing half-written left behind


def test_provenance_names_version_commit_and_solver() -> None:
    p = provenance("HIGHS")
    assert p["tmsim_version"] and p["solver"] == "HIGHS"
    # read from the installed package's metadata, which names tmsim's own version
    import tmsim

    assert p["tmsim_version"] == tmsim.__version__
    assert p["solver_version"] != "not installed"  # highspy is a dependency
    assert set(p["libraries"]) >= {"numpy", "cvxpy", "simpy"}
    commit = git_commit()
    assert commit == "unknown" or len(commit.split("-")[0]) == 40


def test_bad_result_files_name_the_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(ResultFileError, match=r"junk\.parquet"):
        read_table(junk)
    bare = tmp_path / "bare.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(bare)
    with pytest.raises(ResultFileError, match="no tmsim metadata"):
        read_table(bare)
    lone = tmp_path / "lone.csv"
    lone.write_text("a\n1\n")
    with pytest.raises(ResultFileError, match=r"lone\.meta\.json"):
        read_table(lone)
    with pytest.raises(TmsimError, match=r"\.parquet or \.csv"):
        write_table(pd.DataFrame(), tmp_path / "x.txt", {})
