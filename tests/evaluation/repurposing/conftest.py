"""The planted graph every repurposing test reads (drugs, diseases, genes; an ``indication``
relation stored in both orientations, ``contraindication`` the known negatives)."""
import pytest

from openbench.datasets.loader import load_dataset
from tests.bases import planted_graph
from tests.helpers import write_samples


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = write_samples(tmp_path_factory.mktemp("repurposing") / "split", planted_graph(3), negatives=False)
    return load_dataset(folder)
