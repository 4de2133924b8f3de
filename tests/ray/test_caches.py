"""The actors' caches of judge.ray (no Ray needed): one file per live actor, lookups that
fall back to the other files, slots reused once an actor is gone."""

from __future__ import annotations

from judge.cache.store import Cache
from judge.ray.caches import ActorCaches, actor_cache
from tests.helpers.cache import entry


def test_each_actor_claims_its_own_file_and_reads_the_others(tmp_path):
    first = actor_cache(tmp_path)
    first.put(entry(1))
    second = actor_cache(tmp_path)  # the first still holds actor-0
    assert (first.path.name, second.path.name) == ("actor-0.sqlite", "actor-1.sqlite")
    assert second.get_response(entry(1).key) == entry(1).response
    assert second.get(entry(1).key) == entry(1)
    assert (second.hits, second.misses) == (2, 0)
    assert second.get_response(entry(2).key) is None and second.misses == 1
    second.put(entry(2))
    assert len(second) == 1 and len(first) == 1  # each writes only its own file
    first.close()
    third = actor_cache(tmp_path)  # actor-0 is free again: no new file per run
    assert third.path.name == "actor-0.sqlite"
    assert third.get_response(entry(2).key) == entry(2).response
    second.close()
    third.close()
    assert sorted(p.name for p in tmp_path.glob("*.sqlite")) == [
        "actor-0.sqlite",
        "actor-1.sqlite",
    ]


def test_also_read_files_and_replay_mode(tmp_path):
    with Cache(tmp_path / "plain.sqlite") as plain:
        plain.put(entry(3))
    settings = ActorCaches.of(
        tmp_path / "actors", "replay", [tmp_path / "plain.sqlite", tmp_path / "absent.sqlite"]
    )
    cache = settings.open()
    assert cache is not None and cache.mode == "replay"
    assert cache.get_response(entry(3).key) == entry(3).response
    cache.put(entry(4))  # replay stores nothing
    assert len(cache) == 0 and not (tmp_path / "absent.sqlite").exists()
    cache.close()
    assert ActorCaches.of(None).open() is None
