"""The priority-file parser (SPEC §5): items, status, description, priority, labels, tags, identity."""

from board.imports.priority_parse import item_key, priority_file_parse


def _parse(text: str, file_name: str = "q3.md"):
    return priority_file_parse(text, file_name=file_name)


def test_every_checkbox_list_form_is_an_item_and_x_means_done():
    items = _parse("- [ ] dash\n* [x] star\n+ [X] plus\n1. [ ] numbered\n2) [ ] paren\n- plain bullet\ntext [ ] no\n")

    assert [(i.title, i.done) for i in items] == [
        ("dash", False),
        ("star", True),
        ("plus", True),
        ("numbered", False),
        ("paren", False),
    ]
    assert [i.line for i in items] == [1, 2, 3, 4, 5]


def test_indented_lines_under_an_item_are_its_description_dedented():
    items = _parse("- [ ] Rotate keys\n  Keys leaked.\n\n      code\n  - a note\nNext paragraph\n- [ ] Other\n")

    assert items[0].description == "Keys leaked.\n\n    code\n- a note"
    assert items[1].description == ""


def test_a_nested_checkbox_is_its_own_item_and_ends_the_parent_description():
    items = _parse("- [ ] Parent\n  about parent\n  - [ ] Child\n    about child\n")

    assert [(i.title, i.description) for i in items] == [("Parent", "about parent"), ("Child", "about child")]


def test_checkboxes_in_a_code_fence_are_not_items():
    items = _parse("```\n- [ ] not an item\n```\n- [ ] real\n")

    assert [i.title for i in items] == ["real"]


def test_headings_above_an_item_are_its_labels_with_numbering_and_priority_tags_stripped():
    text = "# Q3 Roadmap\n## 1. P0: Security\n### 2.3 Backend\n- [ ] Add retries\n## Docs\n- [ ] Guide\n"

    items = _parse(text)

    assert [i.labels for i in items] == [("Q3 Roadmap", "Security", "Backend"), ("Q3 Roadmap", "Docs")]


def test_priority_comes_from_the_nearest_heading_with_a_marker():
    text = (
        "**Priority Level:** Low\n"
        "# Critical fixes\n- [ ] a\n"
        "## Medium things\n- [ ] b\n"
        "## Plain section\n- [ ] c\n"
        "# P1 Backend\n- [ ] d\n"
        "# Highway names are not markers\n- [ ] e\n"
    )

    assert [i.priority for i in _parse(text)] == ["P0", "P2", "P0", "P1", "P3"]


def test_without_a_heading_marker_the_priority_level_line_applies_even_below_the_items():
    assert [i.priority for i in _parse("# Plan\n- [ ] a\n\n**Priority Level:** HIGH\n")] == ["P1"]
    assert [i.priority for i in _parse("- [ ] a\n**Priority Level:** P0 - critical\n")] == ["P0"]


def test_without_any_marker_the_priority_is_p2():
    assert [i.priority for i in _parse("# Plan\n- [ ] a\n")] == ["P2"]


def test_at_slug_names_the_agent_and_hash_word_adds_a_label_both_leave_the_title():
    items = _parse("## Ops\n- [ ] Rotate @Claude-1 the keys #security #ops fix #123 mail a@b.com\n")

    assert items[0].title == "Rotate the keys fix #123 mail a@b.com"
    assert items[0].suggested_agent == "claude-1"
    assert items[0].labels == ("Ops", "security", "ops")


def test_identity_is_stable_under_case_and_whitespace_and_tags_but_not_text_or_section():
    base = _parse("## Backend\n- [ ] Add retries to webhooks\n")[0].key
    same = [
        "## backend\n-   [ ]   add  RETRIES to webhooks  \n",
        "## 2. P0 Backend\n- [x] Add retries to webhooks @codex #later\n",
    ]
    assert all(_parse(text)[0].key == base for text in same)
    assert _parse("## Backend\n- [ ] Add retries to the webhooks\n")[0].key != base
    assert _parse("## Frontend\n- [ ] Add retries to webhooks\n")[0].key != base
    assert _parse("## Backend\n- [ ] Add retries to webhooks\n", file_name="other.md")[0].key != base
    assert base == item_key(file_name="q3.md", headings=("Backend",), text="add retries to webhooks")
    assert len(base) == 64


def test_the_same_item_twice_under_one_heading_gets_two_identities():
    items = _parse("- [ ] Same\n- [ ] same\n")

    assert len({i.key for i in items}) == 2
