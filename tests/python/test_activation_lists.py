"""The Python activation names (quack_cpp.gemm_act_ops.ACTIVATIONS, GATED_ACTIVATIONS) against
the C++ lists they must equal (src/gemm/activation_list.h, value order; "identity" is value 0).
Read as source, not imported: runs without torch or the extension."""
import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cpp_names(macro):
    text = (ROOT / "src/gemm/activation_list.h").read_text()
    body = re.search(r"#define %s\(X\)(.*?)(?:\n#|\Z)" % macro, text, re.S).group(1)
    return tuple(re.findall(r'X\(k\w+,\s*"(\w+)"\)', body))


def _py_tuple(name):
    tree = ast.parse((ROOT / "python/quack_cpp/gemm_act_ops.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not assigned in gemm_act_ops.py")


def test_elementwise_names_match_cpp():
    cpp = _cpp_names("QUACK_FOR_ELEMENTWISE_ACTS")
    assert len(cpp) >= 5
    assert _py_tuple("ACTIVATIONS") == ("identity",) + cpp


def test_gated_names_match_cpp():
    cpp = _cpp_names("QUACK_FOR_GATED_ACTS")
    assert len(cpp) >= 5
    assert _py_tuple("GATED_ACTIVATIONS") == cpp
