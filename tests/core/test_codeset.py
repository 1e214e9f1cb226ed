"""Module names: which ones the server drops, and which ones it reads back as another name."""

from __future__ import annotations

import hashlib
import re

import pytest

from gitops.core import codeset
from gitops.core.codeset import (
    CodeSet,
    Module,
    _DigestMemo,
    code_length,
    content_digest,
    dropped_name_reason,
    module_from_wire,
    node_base64,
    refused_name_reason,
    upload_body,
    upload_body_length,
)
from gitops.core.endpoints import MAX_CODE_LENGTH
from tests.factories import record_calls


@pytest.mark.parametrize("name", ["main", "role.harvester", "lib/util", "win\\path", "a$b", "a$DOT", "a$dot$b"])
def test_names_the_server_keeps_as_they_are(name: str) -> None:
    assert refused_name_reason(name) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("$tmp", "the name starts with '$', and the server silently drops such modules"),
        (".hidden", "the name starts with '.', and the server silently drops such modules"),
    ],
)
def test_names_the_server_drops(name: str, reason: str) -> None:
    assert dropped_name_reason(name) == reason
    assert refused_name_reason(name) == reason


def test_the_empty_name_is_kept_by_the_server_but_refused_from_files() -> None:
    # The private server drops names whose first character is $ . / or \; the empty name has none, and it keeps it.
    assert dropped_name_reason("") is None
    assert refused_name_reason("") == "the name is empty, and no file or require can name such a module"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "a$DOT$b",
            "the name contains '$DOT$', the server's stored form of '.', so the server would return it as 'a.b' and "
            "no plan would ever match",
        ),
        (
            "lib$SLASH$util",
            "the name contains '$SLASH$', the server's stored form of '/', so the server would return it as "
            "'lib/util' and no plan would ever match",
        ),
        (
            "x$BACKSLASH$y$DOT$z",
            "the name contains '$DOT$' and '$BACKSLASH$', the server's stored forms of '.' and '\\\\', so the "
            "server would return it as 'x\\\\y.z' and no plan would ever match",
        ),
    ],
)
def test_names_the_server_reads_back_as_another_name(name: str, reason: str) -> None:
    # The private server stores '.', '/' and '\' as these markers and turns every marker back on reading
    # (@screeps/backend utils.translateModulesFromDb), so a literal marker comes back changed.
    assert refused_name_reason(name) == reason
    assert dropped_name_reason(name) is None  # kept, so the stand-in stores it like the server does


@pytest.mark.parametrize("name", ["lib/\udcff", "\ud800x"])
def test_a_name_holding_a_lone_surrogate_is_refused(name: str) -> None:
    # Only a code set file can hold one (a JSON escape); from files the build refuses a name that is not UTF-8.
    reason = "the name is not UTF-8 text (it holds a lone surrogate), and module names travel as UTF-8"
    assert refused_name_reason(name) == reason
    assert refused_name_reason("lib/é😀") is None


@pytest.mark.parametrize("name", ["/abs", "\\win"])
def test_names_starting_with_a_separator_are_dropped(name: str) -> None:
    assert refused_name_reason(name) == f"the name starts with {name[0]!r}, and the server silently drops such modules"


# --- modules and code sets -----------------------------------------------------------------------------------


def test_a_module_is_text_or_binary_never_both_nor_neither() -> None:
    with pytest.raises(ValueError, match="either text or binary"):
        Module("x")
    with pytest.raises(ValueError, match="either text or binary"):
        Module("x", text="a", binary=b"a")


def test_text_and_binary_of_the_same_bytes_differ() -> None:
    text, binary = Module("m", text="abc"), Module("m", binary=b"abc")
    assert text.digest != binary.digest
    assert (text.is_binary, binary.is_binary) == (False, True)
    assert Module("m", text="abc") == text  # the digest takes no part in equality, the content does
    assert Module("other", text="abc").digest == text.digest  # the name is not part of a module's digest


def test_size_is_utf8_bytes_for_text_and_raw_bytes_for_binary() -> None:
    assert Module("m", text="é𝄞").size == 2 + 4
    assert Module("m", binary=b"\0\1\2").size == 3


def test_binary_travels_as_base64() -> None:
    assert Module("m", binary=b"\0asm").wire() == {"binary": "AGFzbQ=="}
    assert Module("m", text="t").wire() == "t"


@pytest.mark.parametrize("encoded", ["AGFzbQ==", "AGFzbQ"])  # cargo-screeps leaves the padding out
def test_binary_from_the_wire_with_or_without_padding(encoded: str) -> None:
    assert module_from_wire("m", {"binary": encoded}) == Module("m", binary=b"\0asm")


@pytest.mark.parametrize(
    ("encoded", "raw"),
    [
        ("AGFz\nbQ==", b"\0asm"),  # line breaks (a MIME encoder's 76-character lines)
        (" AG Fz bQ ", b"\0asm"),  # spaces
        ("-_8", b"\xfb\xff"),  # the URL-safe alphabet
        ("+/8=", b"\xfb\xff"),
        ("QQ==QUJD", b"A"),  # Node stops at the first '='
        ("QUJDR", b"ABC"),  # a last lone character holds no whole byte and is dropped
        ("not base64!", bytes.fromhex("9e8b5b6ac7ba")),  # characters outside both alphabets are skipped
    ],
)
def test_binary_from_the_wire_is_read_as_node_reads_base64(encoded: str, raw: bytes) -> None:
    # The private server stores any text under "binary" as sent, and the game decodes it with Buffer.from(...,
    # 'base64'): the plan must see the bytes the game will load, not refuse the branch.
    assert module_from_wire("m", {"binary": encoded}) == Module("m", binary=raw)
    assert node_base64(encoded) == raw


@pytest.mark.parametrize("encoded", ["not base64!", "A", "-_8", "AGFz\nbQ=="])
def test_strict_reading_accepts_only_the_standard_alphabet(encoded: str) -> None:
    with pytest.raises(ValueError, match="module 'm' has invalid base64 in 'binary'"):
        module_from_wire("m", {"binary": encoded}, strict=True)
    assert module_from_wire("m", {"binary": "AGFzbQ"}, strict=True) == Module("m", binary=b"\0asm")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"binary": 5}, "module 'm' is neither a string nor {'binary': base64}"),
        ({"binary": "AA==", "extra": "x"}, "module 'm' is neither a string nor {'binary': base64}"),
        (None, "module 'm' is neither a string nor {'binary': base64}"),
        (3, "module 'm' is neither a string nor {'binary': base64}"),
    ],
)
def test_anything_else_from_the_wire_is_refused(value: object, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)) as caught:
        module_from_wire("m", value)
    assert str(caught.value) == reason


def test_a_code_set_from_the_wire() -> None:
    code = CodeSet.from_wire({"main": "m", "lib.wasm": {"binary": "AA"}})
    assert code.names() == ["lib.wasm", "main"]
    assert [m.name for m in code] == ["lib.wasm", "main"]
    assert (len(code), "main" in code, "other" in code) == (2, True, False)
    assert code.wire() == {"lib.wasm": {"binary": "AA=="}, "main": "m"}
    assert code.total_size == 2
    with pytest.raises(ValueError, match="'modules' is not an object"):
        CodeSet.from_wire(["main"])


def test_equal_sets_have_equal_digests_whatever_the_order() -> None:
    a = CodeSet.of([Module("a", text="1"), Module("b", text="2")])
    b = CodeSet.of((Module("b", text="2"), Module("a", text="1")))
    assert a.digest == b.digest
    assert CodeSet.of([Module("a", text="1"), Module("b", text="3")]).digest != a.digest
    # A module renamed is another set, though every content is the same.
    assert CodeSet.of([Module("a", text="1"), Module("c", text="2")]).digest != a.digest


@pytest.mark.parametrize(
    ("modules", "length"),
    [
        ({}, 2),  # {}
        ({"main": ""}, 11),  # {"main":""}
        ({"main": "é"}, 12),  # one UTF-16 unit
        ({"main": "𝄞"}, 13),  # an astral character is two UTF-16 units, as JavaScript counts
        ({"main": 'a"\n'}, 16),  # escapes count as the JSON text spells them: \" and \n
        ({"m": {"binary": "AA=="}}, 23),  # {"m":{"binary":"AA=="}}
        ({"main": "\ud800"}, 17),  # a lone surrogate is written as its six-character escape, \ud800
    ],
)
def test_code_length_counts_like_json_stringify(modules: dict[str, object], length: int) -> None:
    assert code_length(modules) == length


def test_server_length_and_the_5_mb_line() -> None:
    under = {"main": "x" * (MAX_CODE_LENGTH - 11)}
    assert code_length(under) == MAX_CODE_LENGTH
    assert code_length({"main": "x" * (MAX_CODE_LENGTH - 10)}) > MAX_CODE_LENGTH
    # Astral characters count twice, so half as many of them reach the line.
    astral = {"main": "𝄞" * ((MAX_CODE_LENGTH - 10) // 2)}
    assert code_length(astral) > MAX_CODE_LENGTH
    assert CodeSet.of([Module("main", text="𝄞")]).server_length() == 13


@pytest.mark.parametrize("branch", ["default", "é-branch", "𝄞"])
@pytest.mark.parametrize(
    "modules",
    [
        [],
        [Module("main", text="module.exports.loop = () => {};")],
        [Module("main", text='é 𝄞 \ud800 \n " \\ \u2028 \x7f')],
        [Module("wasm", binary=b"\0\1\2"), Module("main", text="x")],
    ],
)
def test_a_sets_lengths_are_those_of_its_wire_from_one_encoding(branch: str, modules: list[Module]) -> None:
    code = CodeSet.of(modules)
    assert code.server_length() == code_length(code.wire())
    expected = upload_body_length(branch, code.wire())
    assert code.upload_body_length(branch) == expected == len(upload_body(branch, code.wire()))


def test_a_pickled_set_keeps_its_lengths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local read's child computes the lengths; the plan, given the pickled set, does not encode it again."""
    import pickle

    code = CodeSet.of([Module("main", text="x" * 10_000), Module("lib", text="é")])
    expected = (code.server_length(), code.upload_body_length("default"))
    back = pickle.loads(pickle.dumps(code))  # noqa: S301 - our own bytes
    encoded = record_calls(monkeypatch, codeset, "request_body")
    assert (back.server_length(), back.upload_body_length("default")) == expected
    wire = back.wire()
    assert not any(b == wire or (isinstance(b, dict) and b.get("modules")) for b in encoded), "encoded again"
    assert CodeSet.of([Module("main", text="y")]).server_length() == 12  # a set of its own: encoded here
    assert {"main": "y"} in encoded


def test_a_pickled_set_comes_back_in_order_with_every_fact_and_nothing_hashed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child's set travels as columns: the same modules in the same order, text and binary, each with its digest
    and size, and the set's own digest, none of them computed again on this side."""
    import pickle

    code = CodeSet({"z": Module("z", text="é" * 3), "a": Module("a", binary=b"\0asm"), "m": Module("m", text="")})
    set_digest = code.digest
    blob = pickle.dumps(code)
    hashed = record_calls(monkeypatch, codeset, "content_facts")
    digested = record_calls(monkeypatch, codeset, "set_digest")
    back = pickle.loads(blob)  # noqa: S301 - our own bytes
    assert list(back.modules) == ["z", "a", "m"]
    assert [(m.name, m.text, m.binary, m.digest, m.size) for m in back.modules.values()] == [
        (m.name, m.text, m.binary, m.digest, m.size) for m in code.modules.values()
    ]
    assert back.digest == set_digest
    assert (hashed, digested) == ([], [])
    with pytest.raises(AttributeError):
        back.modules["z"].text = "changed"  # still frozen


def test_a_digest_is_sha256_of_the_kind_and_the_bytes_whether_memoised_or_not() -> None:
    text = "module.exports.loop = function () {}; // é"
    expected_text = hashlib.sha256(b"t\0" + text.encode("utf-8")).hexdigest()
    expected_binary = hashlib.sha256(b"b\0" + b"\0asm").hexdigest()
    assert content_digest(text) == expected_text
    assert content_digest(b"\0asm") == expected_binary
    # An equal text that is another object (as the server's answer holds it) gets the same digest, from the memo.
    again = "".join(["module.exports.loop = function () {}; ", "// é"])
    assert again is not text
    assert Module("a", text=text).digest == Module("b", text=again).digest == expected_text
    assert Module("c", binary=b"\0asm").digest == expected_binary
    # A text and the bytes of it never share a digest, even though both kinds share the memo.
    assert Module("d", text="abc").digest != Module("e", binary=b"abc").digest
    # The size comes with the digest, also when the memo knew the text already.
    assert Module("f", text=again).size == len(again.encode()) == 43


def test_the_digest_memo_keeps_a_bounded_amount_of_content() -> None:
    memo = _DigestMemo()
    memo.LIMIT = 100
    for n in range(50):
        content = f"{n:02d}" * 10  # 20 characters each
        assert memo.facts(content) == (content_digest(content), 20)
    assert sum(len(c) for c in memo._memo) <= 100
    assert list(memo._memo)[-1] == "49" * 10  # the newest stay, the oldest went first
    big = "x" * 101  # over the whole limit: hashed, never kept
    assert memo.facts(big) == (content_digest(big), 101)
    assert big not in memo._memo


def test_a_module_pickles_as_it_was_and_its_found_digest_is_not_computed_again() -> None:
    """The child's modules come back with their digests and sizes (not found again); told to this process
    (:func:`remember_digests`), meeting the very same text again costs no hashing, while an equal text made here is
    hashed as always."""
    import pickle

    from gitops.core.codeset import CodeSet, Module, content_facts, remember_digests

    code = CodeSet.of([Module("main", text="module.exports.loop = () => {};\n" * 50), Module("w", binary=b"\0asm")])
    back = pickle.loads(pickle.dumps(code))  # noqa: S301 - our own bytes
    assert back == code
    assert [(m.digest, m.size, m.is_binary) for m in back] == [(m.digest, m.size, m.is_binary) for m in code]
    text = back.modules["main"].text
    assert text is not None
    # Told facts that no hash of this text gives: a lookup of this object answers them without hashing it ...
    planted = Module.__new__(Module)
    for name, value in (("name", "main"), ("text", text), ("binary", None), ("digest", "f" * 64), ("size", 7)):
        object.__setattr__(planted, name, value)
    remember_digests([planted])
    assert Module("again", text=text).digest == "f" * 64
    # ... and an equal text that is another object is hashed as always.
    other = "".join(["module.exports.loop = () => {};\n"] * 50)
    assert other == text
    assert other is not text
    assert Module("other", text=other).digest == content_facts(other)[0] == code.modules["main"].digest
