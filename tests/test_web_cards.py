"""What a session shows of each call and what changed since the last render (web/pages/cards.py)."""

from __future__ import annotations

from toollatch.web.pages.cards import Changes, Verdict, card_id


def test_card_ids_are_stable_and_distinct_per_stream_and_key() -> None:
    assert card_id(0, (0, 1, 0)) == "call-0-0-1-0"
    assert card_id(1, (0, 1, 0)) != card_id(0, (0, 1, 0))
    assert card_id(0, (2,)) == "call-0-2"


def test_progress_alone_is_not_essential_but_a_transition_is() -> None:
    assert Changes(cards={"call-0-0"}).any() and not Changes(cards={"call-0-0"}).essential
    assert Changes(cards={"call-0-0"}, transitions={"call-0-0"}).essential
    assert not Changes().any()


def test_merge_covers_both_and_keeps_verdict_order() -> None:
    first = Changes(cards={"a"}, verdicts=[Verdict("a committed", "committed")])
    later = Changes(cards={"b"}, transitions={"b"}, status=True, verdicts=[Verdict("b failed", "failed")])
    merged = first.merge(later)
    assert merged.cards == {"a", "b"} and merged.transitions == {"b"} and merged.status
    assert [v.text for v in merged.verdicts] == ["a committed", "b failed"]
    assert first.cards == {"a"}  # inputs unchanged


def test_everything_redoes_every_region() -> None:
    full = Changes.everything()
    assert full.layout and full.status and full.controls and full.results and full.reset and full.essential
