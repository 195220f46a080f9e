"""The option schema from Python: align() gives every bad value the message the command line,
experiment files, specs and model files give it (tests/service/test_option_schema.cpp derives
the same bad values from the same rows), and the docstring and method list follow the tables."""
import math

import numpy as np
import pytest

import dcalign


def _bad_values(o):
    expected = o["expected"]
    out = []
    if o["type"] == "integer":
        bound = int(expected.split(" to ")[1])
        out.append((-1, f" -1 is out of range: expected {expected}"))
        if bound < 2**62:
            out.append((bound + 1, f" {bound + 1} is out of range: expected {expected}"))
        out.append((2.5, f" '2.5' is not an integer: expected a whole decimal number from {expected}"))
    elif o["type"] == "real":
        for v, shown in ((-1.0, "-1"), (math.nan, "nan"), (math.inf, "inf")):
            out.append((v, f" {shown} is out of range: expected {expected}"))
    elif o["type"] == "choice":
        out.append(("bogus", f" 'bogus' is unknown: expected {expected}"))
    return out  # a flag takes True or False; anything else is a TypeError (below)


def _anchors():
    rng = np.random.default_rng(7)
    return rng.standard_normal((3, 12, 3))


def test_every_bad_value_gets_the_schemas_message():
    A = _anchors()
    checked = 0
    for o in dcalign.options():
        if not o["python"]:
            continue
        method = o["methods"][0] if o["methods"] else "odc"
        for value, words in _bad_values(o):
            with pytest.raises(ValueError) as e:
                dcalign.align(A, method, **{o["python"]: value})
            assert o["python"] + words in str(e.value), (o["python"], value, str(e.value))
            checked += 1
    assert checked >= 35


def test_a_value_of_the_wrong_type_is_a_type_error_with_the_same_words():
    with pytest.raises(TypeError) as e:
        dcalign.align(_anchors(), "kawakami", kawakami_form=3)
    assert "kawakami_form is an integer (3): expected a string, one of: qr-svd, eigen" in str(e.value)


def test_text_for_a_number_or_flag_is_a_type_error():
    with pytest.raises(TypeError, match="rdp_memory is a string \\('7'\\): expected an integer, 1 to 1000"):
        dcalign.align(_anchors(), "rdp-ls", rdp_memory="7")
    with pytest.raises(TypeError, match="evaluate is a string"):
        dcalign.align(_anchors(), "odc", evaluate="no")


def test_unknown_and_non_python_keywords_are_type_errors():
    for k in ("gopp_tolerence", "precision"):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            dcalign.align(_anchors(), "odc", **{k: 1})


def test_an_option_of_another_method_is_a_value_error_naming_its_methods():
    # What `dcalign align` says for --gopp-tolerance with --method odc, for every option that
    # only some methods use, given its own default (a valid value) and a method not among them.
    A = _anchors()
    convert = {"integer": int, "real": float, "choice": str}
    checked = 0
    for o in dcalign.options():
        if not o["python"] or not o["methods"] or o["type"] not in convert:
            continue
        other = next(m for m in dcalign.methods() if m not in o["methods"])
        with pytest.raises(ValueError) as e:
            dcalign.align(A, other, **{o["python"]: convert[o["type"]](o["default"])})
        message = str(e.value)
        assert f"{o['python']} is not used by method {other} (only by " in message, message
        assert all(m in message for m in o["methods"]), message
        assert message.endswith("); remove it or choose that method"), message
        # The same option with one of its own methods is taken.
        G, _ = dcalign.align(A, o["methods"][0], **{o["python"]: convert[o["type"]](o["default"])})
        assert G.shape == (3, 3, 3)
        checked += 1
    assert checked >= 12


def test_docstring_and_method_list_come_from_the_tables():
    doc = dcalign.align.__doc__
    for m in dcalign.methods():
        assert f'"{m}"' in doc
    for o in dcalign.options():
        if o["python"]:
            assert f"        - ``{o['python']}`` (" in doc, o["python"]
    assert "{options}" not in doc and "{methods}" not in doc
    assert dcalign.methods()[:2] == ["odc", "imakura"]
