"""The MiniWoB++ oracles that read the page (issue 44 item 11): each plays its plan from the instruction and what
the snapshot shows, on snapshots written in the browser tools' format (the pages themselves are played in
``test_miniwob.py::test_the_oracle_solves_its_page``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricgym.core.types import Message
from rubricgym.envs.gui import miniwob_agents as oracles


def play(agent: oracles.MiniWobOracle, *pages: str) -> list[tuple[str, dict]]:
    """The calls ``agent`` makes on successive snapshots (the last one repeats once the pages run out)."""
    calls = []
    for i in range(len(pages) + 4):
        page = pages[min(i, len(pages) - 1)]
        out = asyncio.run(agent.act([Message(role="user", content=page)], []))
        call = json.loads(out.removeprefix("<tool_call>").removesuffix("</tool_call>"))
        calls.append((call["name"], call["arguments"]))
        if call["name"] == "done":
            break
    return calls


def page(task: str, body: str) -> str:
    return f"Task: {task}\nComplete the task on the web page.\n\nPage (elements have [ref=eN]):\n{body}"


SUBMIT = '    - button "Submit" [ref=e99]\n'


@pytest.mark.parametrize(
    ("problem", "x"),
    [("4 - x = 49", "-45"), ("x - 7 = 3", "10"), ("x + 2 = 9", "7"), ("6 + x = 1", "-5")],
)
def test_simple_algebra_solves_the_equation_shown(problem, x):
    snap = page(
        "Solve for x and type your answer into the textbox. Press Submit when done.",
        f"  - generic [ref=e5]: {problem}\n  - generic [ref=e6]:\n    - textbox [ref=e7]\n{SUBMIT}",
    )
    assert play(oracles.SimpleAlgebra(), snap)[:2] == [("fill", {"ref": "e7", "text": x}), ("click", {"ref": "e99"})]


def test_simple_arithmetic_multiplies_an_x():
    snap = page(
        "Solve the math problem and type your answer into the textbox. Press submit when done.",
        f"  - generic [ref=e6]: 7 x 8 =\n  - textbox [ref=e7]\n{SUBMIT}",
    )
    assert play(oracles.SimpleArithmetic(), snap)[0] == ("fill", {"ref": "e7", "text": "56"})


def test_find_word_counts_words_and_drops_punctuation():
    snap = page(
        'Find the 3rd word in the paragraph, type that into the textbox and press "Submit".',
        f"  - paragraph [ref=e5]: Tellus cursus aliquam. Adipiscing.\n  - textbox [ref=e6]\n{SUBMIT}",
    )
    assert play(oracles.FindWord(), snap)[0] == ("fill", {"ref": "e6", "text": "aliquam"})


TABLE = """    - table [ref=e6]:
      - row [ref=e7]:
        - cell "Language" [ref=e8]
        - cell "Spanish" [ref=e9]
      - row [ref=e13]:
        - cell "Color" [ref=e14]
        - cell "olive" [ref=e15]
"""


def test_read_table_2_fills_each_labelled_field_from_the_table():
    form = (
        '      - generic [ref=e24]: "Color:"\n        - textbox [ref=e25]\n'
        '      - generic [ref=e27]: "Language:"\n        - textbox [ref=e28]\n'
    )
    snap = page(
        "Enter the value that corresponds with each label into the form and submit when done.", TABLE + form + SUBMIT
    )
    assert play(oracles.ReadTable2(), snap)[:3] == [
        ("fill", {"ref": "e25", "text": "olive"}),
        ("fill", {"ref": "e28", "text": "Spanish"}),
        ("click", {"ref": "e99"}),
    ]
    one = page("Enter the value of Language into the text field and press Submit.", TABLE + "  - textbox [ref=e23]\n")
    assert play(oracles.ReadTable(), one)[0] == ("fill", {"ref": "e23", "text": "Spanish"})


def test_odd_or_even_marks_by_parity():
    rows = "".join(
        f'  - generic [ref=e{n}0]:\n    - button "Odd" [ref=e{n}1]\n    - generic [ref=e{n}2]: "{v}"\n'
        f'    - button "Even" [ref=e{n}3]\n'
        for n, v in ((1, 3), (2, -4))
    )
    snap = page("Mark the numbers below as odd or even and press submit when done.", rows + SUBMIT)
    assert [c for _, c in play(oracles.OddOrEven(), snap)[:3]] == [{"ref": "e11"}, {"ref": "e23"}, {"ref": "e99"}]


def test_use_autocomplete_picks_the_suggestion_the_page_lists_with_the_ending():
    start = page('Enter an item that starts with "Hon" and ends with "ng".', '  - textbox "Tags:" [ref=e5]\n' + SUBMIT)
    listed = start + (
        "  - list [ref=e9]:\n    - listitem [ref=e10] [cursor=pointer]:\n      - generic [ref=e11]: Honduras\n"
        "    - listitem [ref=e12] [cursor=pointer]:\n      - generic [ref=e13]: Hong Kong\n"
    )
    calls = play(oracles.UseAutocomplete(), start, listed, listed)
    assert calls[:3] == [("fill", {"ref": "e5", "text": "Hon"}), ("click", {"ref": "e13"}), ("click", {"ref": "e99"})]
    assert play(oracles.UseAutocomplete(), start, start)[1] == ("done", {})  # nothing listed: give up, never guess


@pytest.mark.parametrize(("shown", "typed"), [("5:53 AM", "05:53"), ("12:07 AM", "00:07"), ("12:30 PM", "12:30")])
def test_enter_time_and_date_use_the_input_formats(shown, typed):
    snap = page(f"Enter {shown} as the time and press submit.", "  - textbox [ref=e6]\n" + SUBMIT)
    assert play(oracles.EnterTime(), snap)[0] == ("fill", {"ref": "e6", "text": typed})
    date = page("Enter 02/11/2014 as the date and hit submit.", "  - textbox [ref=e6]\n" + SUBMIT)
    assert play(oracles.EnterDate(), date)[0] == ("fill", {"ref": "e6", "text": "2014-02-11"})


def test_choose_list_selects_by_label():
    snap = page("Select Dani from the list and click Submit.", '  - combobox [ref=e5]:\n    - option "Dani"\n' + SUBMIT)
    assert play(oracles.ChooseList(), snap)[:2] == [
        ("select", {"ref": "e5", "option": "Dani"}),
        ("click", {"ref": "e99"}),
    ]


def test_an_instruction_in_another_wording_gets_done_not_a_guess():
    snap = page("Solve this riddle.", "  - textbox [ref=e7]\n" + SUBMIT)
    assert play(oracles.SimpleAlgebra(), snap) == [("done", {})]


def test_text_transform_types_the_characters_shown_one_per_cell():
    cells = "".join(f"      - generic [ref=e{i}]: {c}\n" for i, c in enumerate(['"7"', "z", "q", '"y"'], start=6))
    snap = page(
        "Type the text below into the text field and press Submit.",
        f"  - generic [ref=e4]:\n    - generic [ref=e5]:\n{cells}    - generic [ref=e10]:\n      - textbox [ref=e11]\n"
        + SUBMIT,
    )
    assert play(oracles.TextTransform(), snap)[:2] == [
        ("fill", {"ref": "e11", "text": "7zqy"}),
        ("click", {"ref": "e99"}),
    ]
