"""Pure comparison functions: unified text diff, similarity and JSON field changes."""

from __future__ import annotations

from gateway.replay import FieldChange, compare_text, json_changes


def test_identical_text_has_no_diff_and_similarity_one() -> None:
    assert compare_text("same\n", "same\n").identical
    assert compare_text("same\n", "same\n").similarity == 1.0


def test_changed_text_gets_a_unified_diff_even_without_final_newline() -> None:
    compared = compare_text("a\nb", "a\nc")
    assert not compared.identical
    assert compared.diff is not None
    assert compared.diff.splitlines()[-2:] == ["-b", "+c"]
    assert 0 < compared.similarity < 1


def test_json_changes_name_each_path_and_treat_1_and_1_0_as_equal() -> None:
    before = {"a": 1, "b": [1, 2], "c": True, "weird key": 0}
    after = {"a": 1.0, "b": [1], "c": 1, "d": None, "weird key": 1}
    assert json_changes(before, after) == (
        FieldChange(path="$.b[1]", change="removed", recorded=2),
        FieldChange(path="$.c", change="changed", recorded=True, replayed=1),
        FieldChange(path="$.d", change="added", replayed=None),
        FieldChange(path='$["weird key"]', change="changed", recorded=0, replayed=1),
    )
