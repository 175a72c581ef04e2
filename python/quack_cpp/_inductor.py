"""Inductor fallbacks for every quack_cpp custom op, registered before Inductor lowers a graph.

Inductor runs a custom op without a lowering through an eager fallback. Where it has to
create that fallback itself (the "implicit fallback"), torch up to 2.11 at least formats every
argument's IR for an INFO log even when the log is off (pytorch/pytorch#185937, fixed by
#185951): for a model's deep graph that string takes minutes, so compiling the demo's 12-layer
model with our ops (its run (d)) never left its first step on torch 2.11. Registering the same
fallback beforehand (``make_fallback`` with the layout constraint Inductor itself would pick
from the op's tags) skips that path; the compiled graph is the same.

``note_fake_call()`` runs from every op's fake kernel (cheap: one dict lookup); the fallbacks
are registered once ``torch._inductor.lowering`` is imported, i.e. inside Inductor's compile,
whose AOTAutograd trace calls the fake kernels before the lowering. Ops registered later get
theirs from ``add`` at once. Nothing here imports Inductor."""

import sys

_ops = []          # every registered custom op's OpOverload
_state = {"done": False}


def _register(lowering, op):
    """Inductor's own implicit fallback for ``op`` (graph.py), created ahead of the lowering."""
    if op in lowering.lowerings:
        return
    from torch._library.utils import get_layout_constraint_tag
    tag = get_layout_constraint_tag(op, with_default=True)
    lowering.make_fallback(op, layout_constraint=lowering.tag_to_layout_constraint(tag),
                           warn=False)


def _register_all(lowering):
    for op in _ops:
        try:
            _register(lowering, op)
        except Exception:  # noqa: BLE001 - Inductor's own implicit fallback stays in place
            pass
    _state["done"] = True


def add(op):
    """Adds a registered custom op (its OpOverload)."""
    _ops.append(op)
    if _state["done"]:
        _register_all(sys.modules["torch._inductor.lowering"])


def note_fake_call():
    """Called by every fake kernel: registers the fallbacks once Inductor is loaded."""
    if not _state["done"]:
        lowering = sys.modules.get("torch._inductor.lowering")
        if lowering is not None:
            _register_all(lowering)
