"""The collection order that puts the known-slow tests at the head of each xdist share."""

from __future__ import annotations

from tests.support.slow_first import shares, slow_first

IDS = [f"tests/a.py::t{n}" for n in range(6)] + [f"tests/m.py::t{n}" for n in range(3)]
IDS += [f"tests/z.py::t{n}" for n in range(7)]


def test_the_shares_are_worksteals_first_split() -> None:
    assert shares(16, 4) == [4, 4, 4, 4]
    assert shares(10, 4) == [2, 2, 3, 3]
    assert shares(3, 4) == [0, 1, 1, 1]
    assert sum(shares(3137, 4)) == 3137


def test_each_share_starts_with_its_slow_tests_longest_first_to_the_least_loaded() -> None:
    slow = {"tests/z.py::t6": 30.0, "tests/a.py::t1": 20.0, "tests/m.py": 12.0}
    order = slow_first(IDS, 4, slow)
    assert sorted(order) == list(range(len(IDS)))
    heads = [IDS[order[start]] for start in (0, 4, 8, 12)]
    # share 3 has no slow test: it takes the rest where share 2 left it
    assert heads == ["tests/z.py::t6", "tests/a.py::t1", "tests/m.py::t0", "tests/z.py::t2"]
    # a module key moves the whole module, in its order, onto one share
    assert [IDS[i] for i in order[8:11]] == ["tests/m.py::t0", "tests/m.py::t1", "tests/m.py::t2"]
    # the rest keeps the collection's order
    rest = [IDS[i] for i in order if IDS[i] not in {"tests/z.py::t6", "tests/a.py::t1"}]
    assert [i for i in rest if not i.startswith("tests/m.py")] == [
        i for i in IDS if i not in {"tests/z.py::t6", "tests/a.py::t1"} and "m.py" not in i
    ]


def test_one_worker_unknown_names_or_no_slow_test_keep_the_order() -> None:
    assert slow_first(IDS, 1, {"tests/z.py::t6": 30.0}) == list(range(len(IDS)))
    assert slow_first(IDS, 4, {"tests/gone.py::t": 9.0}) == list(range(len(IDS)))
    assert slow_first(IDS[:2], 4, {"tests/a.py::t1": 1.0}) == [1, 0]


def test_a_class_key_moves_the_class_whole_and_a_test_key_beats_it() -> None:
    ids = ["tests/c.py::t0", "tests/c.py::K::t1", "tests/c.py::K::t2", "tests/c.py::t3"]
    ids += [f"tests/d.py::t{n}" for n in range(4)]
    order = slow_first(ids, 2, {"tests/c.py::K": 9.0, "tests/d.py::t3": 5.0})
    assert [ids[i] for i in order[:2]] == ["tests/c.py::K::t1", "tests/c.py::K::t2"]
    assert ids[order[4]] == "tests/d.py::t3"
    assert slow_first(ids, 2, {"tests/c.py::K::t2": 9.0, "tests/c.py::K": 1.0})[0] == 2
