"""API keys and namespaces: who may use what."""

from __future__ import annotations

import pytest

from docanchor.access import resolve_namespace
from docanchor.errors import Forbidden, InvalidRequest, Unauthorized
from docanchor.settings import Settings


def test_no_keys_means_open_with_default_namespace():
    s = Settings()
    assert resolve_namespace(s, None, None) == "default"
    assert resolve_namespace(s, None, "team b") == "team b"


def test_keys_map_to_their_own_namespaces():
    s = Settings(api_keys=("ka=team-a|shared", "kb=team-b", "bare", "admin=*"))
    assert resolve_namespace(s, "ka", None) == "team-a"
    assert resolve_namespace(s, "ka", "shared") == "shared"
    assert resolve_namespace(s, "kb", None) == "team-b"
    assert resolve_namespace(s, "admin", "团队 c") == "团队 c"
    assert resolve_namespace(s, "admin", None) == "default"
    bare = resolve_namespace(s, "bare", None)
    assert bare.startswith("key-") and bare != resolve_namespace(s, "ka", None)


@pytest.mark.parametrize("key,ns,err", [
    (None, None, Unauthorized), ("", None, Unauthorized), ("nope", None, Unauthorized),
    ("ka", "team-b", Forbidden), ("kb", "team-a", Forbidden), ("ka", "", InvalidRequest),
    ("ka", "x" * 201, InvalidRequest),
])
def test_refusals(key, ns, err):
    s = Settings(api_keys=("ka=team-a|shared", "kb=team-b"))
    with pytest.raises(err):
        resolve_namespace(s, key, ns)


def test_settings_from_env_reads_key_list():
    s = Settings.from_env({"DOCANCHOR_API_KEYS": "ka=team-a, kb"})
    assert s.api_keys == ("ka=team-a", "kb")
