"""Settings: built from DOCANCHOR_* variables, validated, and every one documented."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from docanchor.errors import ConfigError
from docanchor.settings import Settings, env_fields

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"


def test_every_setting_is_documented_in_the_guide():
    guide = GUIDE.read_text()
    for f in env_fields():
        assert f"DOCANCHOR_{f.name.upper()}" in guide, f.name
    assert {f.name for f in fields(Settings)} - {f.name for f in env_fields()} == {"chroma_recorded_in"}
    assert Settings.from_env({"DOCANCHOR_CHROMA_RECORDED_IN": "/x"}).chroma_recorded_in is None


def test_from_env_parses_types_and_overrides_win(tmp_path):
    s = Settings.from_env({"DOCANCHOR_DATA_DIR": str(tmp_path), "DOCANCHOR_CHUNK_TOKENS": "150",
                           "DOCANCHOR_SYNC_WAIT_S": "2.5", "DOCANCHOR_BUDGET_ENCODING": "o200k_base",
                           "DOCANCHOR_PUBLIC_BASE_URL": "http://x:1/"}, port=9999)
    assert (s.data_dir, s.chunk_tokens, s.sync_wait_s, s.budget_encoding) == (tmp_path, 150, 2.5, "o200k_base")
    assert s.public_base_url == "http://x:1" and s.port == 9999


@pytest.mark.parametrize("env", [
    {"DOCANCHOR_CHUNK_TOKENS": "ten"}, {"DOCANCHOR_CHUNK_TOKENS": "5000"},
    {"DOCANCHOR_BUDGET_ENCODING": "p50k_base"}, {"DOCANCHOR_CHUNK_OVERLAP_TOKENS": "400"},
    {"DOCANCHOR_SYNC_WAIT_S": "soon"},
    {"DOCANCHOR_NAMESPACE": "team\u202eevil"},  # the rule of a request's namespace (docanchor.access)
])
def test_bad_values_are_config_errors_naming_the_variable(env):
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env)
    assert next(iter(env)) in err.value.message


@pytest.mark.parametrize("host", ["::1", "0:0:0:0:0:0:0:1", "localhost:8000"])
def test_a_chroma_host_with_a_colon_outside_brackets_is_refused_with_the_way_to_write_it(host):
    """Before (the trial of 3d88e0c, its defect 4): DOCANCHOR_CHROMA_HOST=::1 reached Chroma's client,
    whose URL had no host, and every command said "The vector store refused the operation (ValueError)"."""
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"DOCANCHOR_CHROMA_HOST": host, "DOCANCHOR_CHROMA_PORT": "18000"})
    assert "DOCANCHOR_CHROMA_HOST" in err.value.message and f"[{host}]" in err.value.message
    assert Settings.from_env({"DOCANCHOR_CHROMA_HOST": "[::1]"}).chroma_host == "[::1]"


def test_server_workers_are_checked_and_a_worker_keeps_its_own_files_in_process_dir(tmp_path):
    with pytest.raises(ConfigError, match="DOCANCHOR_SERVER_WORKERS must be 1 to 64; got 0"):
        Settings(data_dir=tmp_path, server_workers=0)
    s = Settings.from_env({"DOCANCHOR_DATA_DIR": str(tmp_path), "DOCANCHOR_SERVER_WORKERS": "3"})
    assert (s.server_workers, s.own_dir) == (3, tmp_path)
    assert s.with_(process_dir=str(tmp_path / "workers" / "1")).own_dir == tmp_path / "workers" / "1"
