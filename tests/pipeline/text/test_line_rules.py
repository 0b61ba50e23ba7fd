"""C4 line removals, FineWeb's document rules and the encoding checks by value, on crafted
boundary cases and on real license text."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.config.quality import LineRules
from pipeline.text.line_rules import apply_line_rules

# a line every rule keeps: terminal punctuation, > 30 characters, no notice, no brace
ANCHOR = "The garden needs water every single morning in summer."
GPL = Path("/usr/share/common-licenses/GPL-3")


def run(*texts: str, line_removals: bool = True, **rules) -> pl.DataFrame:
    frame = pl.DataFrame({"record_id": [f"r{i}" for i in range(len(texts))], "text": texts})
    return apply_line_rules(frame, LineRules(**rules), line_removals=line_removals)


def one(text: str, **kwargs) -> dict:
    return run(text, **kwargs).row(0, named=True)


def sized(core: str, total: int) -> str:
    """One line of exactly `total` characters: `core`, then filler words, then a period."""
    return (core + " " + "ab " * total)[: total - 1] + "."


def test_output_columns_order_and_types():
    out = run(ANCHOR, "")
    assert out.columns == [
        "record_id", "text", "removed_lines", "removed", "reason", "mojibake_ratio",
        "control_ratio", "line_punct_ratio", "short_line_ratio", "char_duplicates_ratio",
        "new_line_ratio",
    ]  # fmt: skip
    assert out.schema["removed_lines"] == pl.UInt32
    assert out.schema["removed"] == pl.List(pl.String)
    assert out["record_id"].to_list() == ["r0", "r1"]
    empty = out.row(1, named=True)  # nothing to judge: left to the other rules
    assert (empty["reason"], empty["removed_lines"], empty["line_punct_ratio"]) == (None, 0, None)


# --- C4 line removals ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "This line ends well.",
        "Is this the right question?",
        "Stop shouting at me!",
        'He said "stop it."',
        'He said "stop"',  # a closing quote is one of C4's end marks
        "She said \u201cgo home.\u201d",
        "He wrote \u2018see you.\u2019",
        "Cited in the article.[1]",  # citations are set aside for the check, not removed
    ],
)
def test_terminal_punctuation_keeps(line):
    out = one(f"{ANCHOR}\n{line}")
    assert (out["text"], out["removed"]) == (f"{ANCHOR}\n{line}", [])


@pytest.mark.parametrize(
    "line",
    [
        "This line does not end",
        "Then it trailed off...",
        "Then it trailed off\u2026",
        "They call it \u201chome\u201d",
        "It ends with a comma,",
    ],
)
def test_terminal_punctuation_removes(line):
    out = one(f"{ANCHOR}\n{line}")
    assert (out["text"], out["removed"], out["removed_lines"]) == (
        ANCHOR,
        ["c4_terminal_punctuation"],
        1,
    )
    assert one(f"{ANCHOR}\n{line}", c4_terminal_punctuation=False)["removed"] == []


def test_lines_are_judged_stripped_but_kept_as_they_are():
    text = f"  {ANCHOR}  \n\tThis line ends well. "
    assert one(text)["text"] == text


def test_min_words_per_line_bound():
    out = one(f"{ANCHOR}\nThree words here.\nTwo words.")
    assert out["removed"] == ["c4_min_words_per_line"]
    assert out["text"] == f"{ANCHOR}\nThree words here."
    assert one(f"{ANCHOR}\nThree words here.", c4_min_words_per_line=4)["removed"] == [
        "c4_min_words_per_line"
    ]
    assert one(f"{ANCHOR}\nTwo words.", c4_min_words_per_line=None)["removed"] == []


def test_max_word_length_bound():
    fine, long = "x" * 1000 + " is fine.", "y" * 1001 + " is long."
    out = one(f"{ANCHOR}\n{fine}\n{long}")
    assert out["removed"] == ["c4_max_word_length"]
    assert out["text"] == f"{ANCHOR}\n{fine}"
    assert one(f"{ANCHOR}\n{long}", c4_max_word_length=None)["removed"] == []
    assert one(f"{ANCHOR}\nA tenletters word.", c4_max_word_length=9)["removed"] == [
        "c4_max_word_length"
    ]


def test_first_broken_rule_names_the_removal_in_c4_order():
    out = one(f"{ANCHOR}\nTwo words\nx{'z' * 1000} no end\nOnly javascript here.")
    assert out["removed"] == [
        "c4_terminal_punctuation",  # also too few words
        "c4_max_word_length",  # also no end mark
        "c4_javascript",
    ]


def test_javascript_lines():
    out = one(f"{ANCHOR}\nPlease enable JavaScript to keep reading.\nPlease enable Java today.")
    assert out["removed"] == ["c4_javascript"]
    assert out["text"] == f"{ANCHOR}\nPlease enable Java today."
    assert one(f"{ANCHOR}\nPlease enable JAVASCRIPT now.", c4_javascript=False)["removed"] == []


@pytest.mark.parametrize(
    "notice",
    [
        "Read our Terms of Use before you continue.",
        "See the PRIVACY POLICY for details.",
        "Our cookie policy explains this.",
        "This website uses cookies to work.",
        "By staying you accept our use of cookies.",
        "We use cookies on every page.",
    ],
)
def test_policy_lines(notice):
    out = one(f"{ANCHOR}\n{notice}")
    assert (out["text"], out["removed"]) == (ANCHOR, ["c4_policy"])
    assert one(f"{ANCHOR}\n{notice}", c4_policy=False)["removed"] == []


def test_policy_near_miss_is_kept():
    assert one(f"{ANCHOR}\nWe use cookie cutters for the biscuits.")["removed"] == []


def test_cookie_notice_and_javascript_line_are_removed_in_order():
    lines = [
        "Welcome to our site. We write about gardening every week.",
        "This site uses cookies to improve your experience.",
        "Tomatoes need full sun and regular watering to thrive.",
        "Please enable JavaScript to view the comments below.",
        "",
        "Basil grows well next to tomatoes in a sunny bed.",
    ]
    out = one("\n".join(lines))
    assert out["removed"] == ["c4_policy", "c4_javascript"]
    assert out["removed_lines"] == 2
    assert out["text"] == "\n".join([lines[0], lines[2], lines[4], lines[5]])
    assert out["reason"] is None


# --- C4 document drops --------------------------------------------------------------------


def test_lorem_ipsum():
    assert one(f"{ANCHOR}\nLorem ipsum dolor sit amet, consectetur.")["reason"] == "c4_lorem_ipsum"
    assert one(f"{ANCHOR}\nLOREM IPSUM dolor sit amet.")["reason"] == "c4_lorem_ipsum"
    assert one(f"{ANCHOR}\nLorem and ipsum are placeholder words.")["reason"] is None
    # in a line the earlier rules remove, it never reaches the output (as in C4's reference)
    removed = one(f"{ANCHOR}\nLorem ipsum dolor sit amet")
    assert (removed["reason"], removed["removed"]) == (None, ["c4_terminal_punctuation"])
    # without line removals, every line is looked at
    assert one("Lorem ipsum dolor sit amet", line_removals=False)["reason"] == "c4_lorem_ipsum"
    assert one(f"{ANCHOR}\nLorem ipsum dolor sit.", c4_lorem_ipsum=False)["reason"] is None


def test_curly_braces():
    assert one(f"{ANCHOR}\nThe set {{1, 2}} has two members.")["reason"] == "c4_curly_braces"
    assert one(f"{ANCHOR}\nThe closing brace }} alone is fine.")["reason"] is None
    code = one(f"{ANCHOR}\nfunction f() {{ return 1; }}")  # removed for its ending first
    assert (code["reason"], code["removed"]) == (None, ["c4_terminal_punctuation"])
    script = one(f"{ANCHOR}\nEnable javascript for var a = {{b: 1}}.")  # javascript comes first
    assert (script["reason"], script["removed"]) == (None, ["c4_javascript"])
    noticed = one(f"{ANCHOR}\nOur cookie policy is {{here}}.")  # braces come before policy
    assert noticed["reason"] == "c4_curly_braces"
    assert one("function f() { return 1; }", line_removals=False)["reason"] == "c4_curly_braces"
    assert one(f"{ANCHOR}\nThe set {{1, 2}} is small.", c4_curly_braces=False)["reason"] is None


def test_only_removed_lines():
    out = one("Menu\n\nHome\nContact us")
    assert (out["reason"], out["removed_lines"], out["text"]) == ("only_removed_lines", 3, "")
    assert one("Menu\nHome", line_removals=False)["removed_lines"] == 0


# --- FineWeb (on the text after line removals) -------------------------------------------


def punct_doc(ending: int, lines: int = 25) -> str:
    """`lines` distinct long lines, `ending` of them end in terminal punctuation."""
    body = [f"Line {i:02d} of a document about rivers and hills" for i in range(lines)]
    return "\n".join(line + ("." if i < ending else ",") for i, line in enumerate(body))


def test_line_punct_ratio_bound():
    at, under = one(punct_doc(3), line_removals=False), one(punct_doc(2), line_removals=False)
    assert (at["line_punct_ratio"], at["reason"]) == (0.12, None)  # datatrove: dropped when <
    assert (under["line_punct_ratio"], under["reason"]) == (0.08, "fineweb_line_punct")
    # datatrove checks the line as it is: a trailing space hides the period
    spaced = one(punct_doc(3).replace(".\n", ". \n", 1), line_removals=False)
    assert spaced["reason"] == "fineweb_line_punct"
    # other scripts' terminals count (datatrove's TERMINAL_PUNCTUATION)
    assert one(
        punct_doc(2) + "\n這是一個很長的句子，用來測試不同文字的句號結尾的判斷方式是否正確。",
        line_removals=False,
    )["line_punct_ratio"] == pytest.approx(3 / 26)
    assert one(punct_doc(0), line_removals=False, fineweb_line_punct_ratio=None)["reason"] is None


def short_doc(short: int, lines: int = 100) -> str:
    body = [f"Short line {i:03d} is here." for i in range(short)]
    body += [f"A much longer line {i:03d} about rivers and hills." for i in range(lines - short)]
    return "\n".join(body)


def test_short_line_ratio_bound():
    at, over = one(short_doc(67), line_removals=False), one(short_doc(68), line_removals=False)
    assert (at["short_line_ratio"], at["reason"]) == (0.67, None)  # datatrove: dropped when >
    assert (over["short_line_ratio"], over["reason"]) == (0.68, "fineweb_short_lines")
    assert one(short_doc(68), line_removals=False, fineweb_short_line_ratio=None)["reason"] is None


def test_short_line_length_bound():
    thirty, thirty_one = "A" * 29 + ".", "A" * 30 + "."
    assert one(thirty, line_removals=False)["short_line_ratio"] == 1.0
    assert one(thirty_one, line_removals=False)["short_line_ratio"] == 0.0
    assert (
        one(thirty_one, line_removals=False, fineweb_short_line_length=31)["short_line_ratio"]
        == 1.0
    )


def duplicated_doc(total: int, repeated: str) -> str:
    """Distinct lines and `repeated` twice, `total` characters without the newlines."""
    head = [f"Distinct line {i:02d} about rivers, hills and the sea." for i in range(20)]
    rest = total - sum(map(len, head)) - 2 * len(repeated)
    return "\n".join([repeated, *head, sized("Padding", rest), repeated])


def test_char_duplicates_ratio_bound():
    repeated = "This exact line appears twice in here."
    assert len(repeated) == 38
    at = one(duplicated_doc(3800, repeated), line_removals=False)
    over = one(duplicated_doc(3799, repeated), line_removals=False)
    assert (at["char_duplicates_ratio"], at["reason"]) == (0.01, None)
    assert over["reason"] == "fineweb_char_duplicates"
    assert over["char_duplicates_ratio"] == pytest.approx(38 / 3799)
    blanks = one("\n\n\n".join([ANCHOR, "Another distinct line of prose here."]))
    assert blanks["char_duplicates_ratio"] == 0.0  # blank lines are not lines to FineWeb


def test_new_line_ratio_bound():
    names = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    lines = [f"Extraordinarilylongword{n} unmistakably." for n in [*names, "india", "juliet"]]
    # 9 newlines, 30 words (the periods are words to spaCy); a trailing newline makes 10 / 30
    at = one("\n".join(lines), line_removals=False)
    over = one("\n".join(lines) + "\n", line_removals=False)
    assert (at["new_line_ratio"], at["reason"]) == (0.3, None)
    assert over["new_line_ratio"] == pytest.approx(1 / 3)
    assert over["reason"] == "fineweb_list_like"
    off = one("\n".join(lines) + "\n", line_removals=False, fineweb_new_line_ratio=None)
    assert (off["new_line_ratio"], off["reason"]) == (None, None)
    # blank lines survive the line removals, and their newlines count as in datatrove
    items = [f"Itemextraordinarilylong{n} is ready." for n in names[:4]]  # 4 words each
    assert one("\n".join(items))["new_line_ratio"] == pytest.approx(3 / 16)
    assert one("\n\n".join(items))["reason"] == "fineweb_list_like"  # 6 / 16


def test_fineweb_measures_the_text_after_removals():
    # 3 of 4 lines are menu items without punctuation: removed first, so the rest passes
    out = one(f"Home\nAbout\nShop\n{ANCHOR}")
    assert (out["reason"], out["line_punct_ratio"], out["removed_lines"]) == (None, 1.0, 3)
    assert (
        one(f"Home\nAbout\nShop\n{ANCHOR}", line_removals=False)["reason"] == "fineweb_short_lines"
    )


# --- encoding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "chars"),
    [
        ("The Caf\u00c3\u00a9 opens at noon.", 2),  # é read as Latin-1
        ("We don\u00e2\u20ac\u2122t know yet.", 3),  # ’ read as Windows-1252
        ("The \u00e2\u20ac bad end.", 2),  # ” with its undefined last byte lost
        ("It costs 10\u00c2\u00a0euros today.", 2),  # NBSP read as Latin-1
        ("A lost character \ufffd here.", 1),
    ],
)
def test_mojibake_sequences(text, chars):
    out = one(text, line_removals=False)
    assert out["mojibake_ratio"] == pytest.approx(chars / len(text))
    assert out["reason"] == "mojibake"


@pytest.mark.parametrize(
    "text", ["S\u00e3o Paulo is big.", "\u00c2NGULO RETO here.", "\u00c5ngstr\u00f6m naïve café."]
)
def test_real_accents_are_not_mojibake(text):
    assert one(text, line_removals=False)["mojibake_ratio"] == 0.0


def test_mojibake_ratio_bound():
    at = one(sized("Caf\u00c3\u00a9", 4000), line_removals=False)  # 2 / 4000
    over = one(sized("Caf\u00c3\u00a9", 3999), line_removals=False)
    assert (at["mojibake_ratio"], at["reason"]) == (0.0005, None)
    assert over["reason"] == "mojibake"
    assert (
        one(sized("Caf\u00c3\u00a9", 100), line_removals=False, max_mojibake_ratio=None)["reason"]
        is None
    )


def test_control_characters():
    for control in ["\x00", "\x1b", "\x0c", "\x7f", "\x85"]:
        assert one(f"{ANCHOR}{control}", line_removals=False)["reason"] == "invalid_characters"
    allowed = one(f"{ANCHOR}\r\n\tIndented line of prose follows here.", line_removals=False)
    assert (allowed["control_ratio"], allowed["reason"]) == (0.0, None)
    at = one(sized("\x00", 100), line_removals=False, max_control_char_ratio=0.01)
    over = one(sized("\x00", 99), line_removals=False, max_control_char_ratio=0.01)
    assert (at["control_ratio"], at["reason"]) == (0.01, None)
    assert over["reason"] == "invalid_characters"
    assert one(f"\x00{ANCHOR}", line_removals=False, max_control_char_ratio=None)["reason"] is None


def test_reason_order():
    assert one("Caf\u00c3\u00a9 \x00 lorem ipsum {.", line_removals=False)["reason"] == "mojibake"
    assert one(f"{ANCHOR}\x00 lorem ipsum {{.", line_removals=False)["reason"] == (
        "invalid_characters"
    )
    assert one(f"{ANCHOR} lorem ipsum {{.", line_removals=False)["reason"] == "c4_lorem_ipsum"


# --- real text, profiles, determinism -----------------------------------------------------


def gpl_preamble() -> list[str]:
    """The GPL-3 preamble's paragraphs, each as it is wrapped in the file."""
    text = GPL.read_text()
    body = text[text.index("Preamble") + len("Preamble") : text.index("TERMS AND CONDITIONS")]
    return [p.strip("\n") for p in body.split("\n\n") if p.strip()]


@pytest.mark.skipif(not GPL.exists(), reason="Debian's common licenses are not installed")
def test_real_license_paragraphs_pass():
    paragraphs = gpl_preamble()
    assert len(paragraphs) == 10
    reflowed = "\n".join(" ".join(p.split()) for p in paragraphs)  # one line per paragraph
    out = one(reflowed)
    assert (out["reason"], out["removed_lines"], out["text"]) == (None, 0, reflowed)
    assert out["line_punct_ratio"] == 1.0 and out["char_duplicates_ratio"] == 0.0
    wrapped = "\n\n".join(paragraphs)  # as in the file: FineWeb passes it too
    assert one(wrapped, line_removals=False)["reason"] is None
    # C4 removes the wrapped lines that do not end a sentence
    cut = one(wrapped)
    kept = [line.strip() for line in cut["text"].split("\n") if line.strip()]
    assert cut["removed_lines"] > 0 and all(line[-1] in ".!?:\"'" for line in kept)


def test_short_message_survives_without_line_removals():
    sms = "Sorry, I'll call you later in the meeting, can you text me the address?"
    assert one(sms, line_removals=False)["reason"] is None
    short = "Ok lar joking wif u oni"
    messages = {  # the short_messages profile: encoding and lorem ipsum only
        "c4_curly_braces": False,
        "fineweb_line_punct_ratio": None,
        "fineweb_short_line_ratio": None,
        "fineweb_char_duplicates_ratio": None,
        "fineweb_new_line_ratio": None,
    }
    kept = one(short, line_removals=False, **messages)
    assert (kept["reason"], kept["text"], kept["removed_lines"]) == (None, short, 0)
    assert one(short)["reason"] == "only_removed_lines"  # as prose it would go


def test_deterministic():
    texts = [
        f"{ANCHOR}\nThis site uses cookies.\nMenu",
        punct_doc(2),
        short_doc(70),
        "Caf\u00c3\u00a9",
        "",
        f"{ANCHOR}\n{ANCHOR}",
    ] * 50
    whole = run(*texts).drop("record_id")
    order = list(range(len(texts)))
    random.Random(7).shuffle(order)
    shuffled = run(*[texts[i] for i in order]).drop("record_id")
    # each text's outcome depends on that text alone: not on its neighbours or their order
    assert_frame_equal(shuffled, whole[order])
    assert_frame_equal(run(*texts[5:17]).drop("record_id"), whole[5:17])
