"""Flavors in the database (SQLite)."""

import pytest

from berth_contract.flavors import FLAVORS
from scheduler.db.api import Conflict, NotFound


def _flavor(name="web.large", **values):
    return {"name": name, "memory_mb": 8192, "root_gb": 40, "ephemeral_gb": 10, "vcpus": 4,
            "extra_specs": {"hw:cpu_policy": "dedicated"}, **values}


def test_sync_creates_the_classic_flavors(database):
    found = {f["name"]: f for f in database.list_flavors()}
    assert list(found) == sorted(FLAVORS)
    for name, sizes in FLAVORS.items():
        assert {key: found[name][key] for key in sizes} == sizes
        assert found[name]["extra_specs"] == {}
        assert found[name]["created_at"].endswith("Z")


def test_create_show_list_delete(database):
    created = database.create_flavor(_flavor())
    assert {k: created[k] for k in ("name", "memory_mb", "root_gb", "ephemeral_gb", "vcpus")} == {
        "name": "web.large", "memory_mb": 8192, "root_gb": 40, "ephemeral_gb": 10, "vcpus": 4}
    assert created["extra_specs"] == {"hw:cpu_policy": "dedicated"}
    assert database.get_flavor("web.large") == created
    assert "web.large" in [f["name"] for f in database.list_flavors()]

    with pytest.raises(NotFound, match="^no flavor named 'web.larg': did you mean 'web.large'\\?$"):
        database.get_flavor("web.larg")
    database.delete_flavor("web.large")
    with pytest.raises(NotFound, match="^no flavor named 'web.large': did you mean 'm1.large'\\?$"):
        database.get_flavor("web.large")
    with pytest.raises(NotFound, match="no flavor named 'web.large'"):
        database.delete_flavor("web.large")


def test_a_name_is_taken_once(database):
    database.create_flavor(_flavor())
    with pytest.raises(Conflict, match="a flavor named 'web.large' exists already"):
        database.create_flavor(_flavor(memory_mb=1024))
    assert database.get_flavor("web.large")["memory_mb"] == 8192
    with pytest.raises(Conflict, match="'m1.tiny' exists already"):
        database.create_flavor(_flavor("m1.tiny"))


def test_set_and_unset_extra_specs(database):
    database.create_flavor(_flavor())
    changed = database.update_flavor_extra_specs("web.large", {"trait:HW_CPU_X86_AVX2": "required",
                                                               "hw:cpu_policy": "shared"})
    assert changed["extra_specs"] == {"hw:cpu_policy": "shared", "trait:HW_CPU_X86_AVX2": "required"}
    assert changed["updated_at"] >= changed["created_at"]
    changed = database.update_flavor_extra_specs("web.large", unset=["hw:cpu_policy"])
    assert changed["extra_specs"] == {"trait:HW_CPU_X86_AVX2": "required"}


def test_unsetting_a_missing_key_changes_nothing(database):
    database.create_flavor(_flavor())
    with pytest.raises(NotFound, match="flavor 'web.large' has no property 'hw:nope'"):
        database.update_flavor_extra_specs("web.large", {"a": "b"}, unset=["hw:cpu_policy", "hw:nope"])
    assert database.get_flavor("web.large")["extra_specs"] == {"hw:cpu_policy": "dedicated"}
    with pytest.raises(NotFound, match="no flavor named 'nope'"):
        database.update_flavor_extra_specs("nope", {"a": "b"})
