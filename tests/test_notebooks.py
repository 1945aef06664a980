"""The notebooks execute end to end, every cell, at a test size appended to their parameter cell (as papermill would
set it: the committed notebook a user opens keeps its own sizes)."""

from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# Fewer rounds, users, rho values and stream counts than the notebook's CI size; every kind of k (a count, "m", "auto") is kept.
TEST_SIZE = {"tradeoffs.ipynb": "ROUNDS = 2\nCLIENTS = 12\nRHOS = [4]\nSTREAMS = [2, \"m\", \"auto\"]"}


@pytest.mark.parametrize("name", ["tradeoffs.ipynb"])
def test_notebook_runs(name, tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="executing notebooks needs nbformat: pip install nbclient ipykernel")
    nbclient = pytest.importorskip("nbclient", reason="executing notebooks needs nbclient: pip install nbclient ipykernel")
    pytest.importorskip("ipykernel", reason="executing notebooks needs a Python kernel: pip install ipykernel")
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), f"{name} is committed with outputs"
    for cell in notebook.cells:  # runs and sweeps go to the test's folder, not a system temporary one
        if "parameters" in cell.metadata.get("tags", []):
            cell.source += f"\n{TEST_SIZE[name]}\nOUT_DIR = {str(tmp_path)!r}"
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert (tmp_path / "sweep" / "time_to_target.html").exists()
    assert (tmp_path / "run" / "trace.parquet").exists()
