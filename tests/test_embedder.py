"""The embedder's size is known without loading the model, so commands that only open the store
(list, read, delete) do not import sentence-transformers and torch (8 s -> 1 s for `docanchor list`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from docanchor.embedder import _pooled_dimension
from docanchor.settings import DEFAULT_EMBEDDING_MODEL
from tests.waiting import BACKSTOP_S

ROOT = Path(__file__).resolve().parents[1]


def test_declared_dimension_is_the_loaded_models(real_embedder):
    assert _pooled_dimension(DEFAULT_EMBEDDING_MODEL) == real_embedder.model.get_embedding_dimension() == 384


def test_a_folder_with_a_dense_layer_or_no_config_is_loaded_instead(tmp_path: Path):
    (tmp_path / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},'
        ' {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]')
    assert _pooled_dimension(str(tmp_path)) is None  # a Dense layer changes the size
    assert _pooled_dimension(str(tmp_path / "missing")) is None


def test_listing_and_reading_never_import_the_model(tmp_path: Path):
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from docanchor.settings import Settings\n"
        "from plugin.api import DocAnchor\n"
        f"da = DocAnchor(Settings(data_dir=Path({str(tmp_path)!r})))\n"
        "assert da.list_documents() == []\n"
        "print('sentence_transformers' in sys.modules, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=BACKSTOP_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]
