#!/usr/bin/env python3
"""dcalign as a typed user writes it: mypy --strict checks this file against the installed package
(its py.typed and the stub of dcalign._core), and running it checks the results
(scripts/test-python.sh does both). Not a pytest module: it prints "typed_usage: ok".

Three users share the span of user 1's top-l principal subspace (the SameSpan condition), each
with its own Haar mixing, so ODC aligns their released anchors exactly; a fourth user joins a
fitted Aligner later, and the Aligner is saved to and loaded from a temporary folder.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import dcalign

Matrix = npt.NDArray[np.float64]

USERS, SAMPLES, FEATURES, DIM, ANCHOR_ROWS = 4, 80, 12, 3, 60
TOL = 1e-9


def orthogonality_error(Q: Matrix) -> float:
    """max |Q^T Q - I| for a matrix with orthonormal columns."""
    return float(np.max(np.abs(Q.T @ Q - np.eye(Q.shape[1]))))


def private_data(rng: np.random.Generator, n: int) -> Matrix:
    """A user's private samples (n, FEATURES): a 4-dimensional latent signal plus noise."""
    latent = rng.standard_normal((n, 4))
    mixing = rng.standard_normal((4, FEATURES))
    # Annotated: NumPy 1.24's stubs type this @ as Any.
    X: Matrix = latent @ mixing + 0.05 * rng.standard_normal((n, FEATURES))
    return X


def check_schema() -> None:
    names: list[str] = dcalign.methods()
    assert "odc" in names and "imakura" in names, names
    schema: list[dict[str, Any]] = dcalign.options()
    python_names = {str(o["python"]) for o in schema if o["python"]}
    assert {"target_rotation", "reference_user", "threads"} <= python_names, python_names
    odc_only = [o["python"] for o in schema if o["methods"] and "odc" in o["methods"]]
    assert "target_rotation" in odc_only, odc_only
    info: dict[str, Any] = dcalign.blas_info()
    assert isinstance(info["library"], str) and info["library"], info
    gpu: bool = dcalign.cuda_available()
    assert isinstance(gpu, bool)


def main() -> None:
    check_schema()
    rng = np.random.default_rng(5)

    # Users: the shared anchor from a common seed, secret bases F_i = V E_i, released data.
    anchor: Matrix = dcalign.make_anchor(ANCHOR_ROWS, FEATURES, kind="uniform", seed=11)
    assert anchor.shape == (ANCHOR_ROWS, FEATURES) and anchor.dtype == np.float64
    assert np.array_equal(anchor, dcalign.make_anchor(ANCHOR_ROWS, FEATURES, seed=11))
    data = [private_data(rng, SAMPLES) for _ in range(USERS)]
    span: Matrix = dcalign.top_right_singular_vectors(data[0], DIM, center=True)
    bases: list[Matrix] = []
    released: list[Matrix] = []
    released_anchors: list[Matrix] = []
    for i, X in enumerate(data):
        F: Matrix = dcalign.secret_basis(X, DIM, mixing="haar", seed=100 + i, subspace=span)
        assert F.shape == (FEATURES, DIM) and orthogonality_error(F) < TOL
        X_released: Matrix = dcalign.release(X, F)
        assert np.allclose(X_released, X @ F)
        bases.append(F)
        released.append(X_released)
        released_anchors.append(dcalign.release(anchor, F))
    own: Matrix = dcalign.secret_basis(data[1], DIM, mixing="uniform", seed=7, center=True)
    assert own.shape == (FEATURES, DIM)

    # Analyst: the first three users' anchors in dcalign's layout, aligned by ODC on user 0.
    stack = dcalign.as_stack(np.stack(released_anchors[:3]))
    assert stack.shape == (3, ANCHOR_ROWS, DIM) and stack[0].flags.f_contiguous
    G: Matrix
    report: dict[str, Any]
    G, report = dcalign.align(stack, method="odc", target_rotation="identity",
                              reference_user=0, threads=1)
    assert G.shape == (3, DIM, DIM) and G.dtype == np.float64
    assert not report["input_copied"] and report["method"] == "odc", report
    assert float(report["orthogonality_error"]) < TOL, report
    assert np.allclose(G[0], np.eye(DIM))  # the reference user keeps its basis
    aligned = [dcalign.transform(A_i, G_i) for A_i, G_i in zip(released_anchors, G)]
    for i, G_i in enumerate(G):
        assert orthogonality_error(G_i) < TOL
        assert np.allclose(aligned[i], aligned[0]), i  # same span: exact agreement
        assert np.allclose(dcalign.transform(released[i], G_i), released[i] @ G_i)

    # The same anchors in float32 give G in float32.
    G32, _ = dcalign.align(stack.astype(np.float32), method="odc", target_rotation="identity")
    assert G32.dtype == np.float32 and np.allclose(G32, G, atol=1e-4)

    # An Aligner fitted on the first three users enrols the fourth from its anchor alone.
    model = dcalign.Aligner()
    G_fit, fit_report = model.fit(stack, method="odc", target_rotation="identity")
    assert np.allclose(G_fit, G) and fit_report["users"] == 3, fit_report
    G_new, enrol_report = model.enroll(released_anchors[3])
    assert G_new.shape == (DIM, DIM) and orthogonality_error(G_new) < TOL
    assert len(enrol_report["residual"]) == 1, enrol_report
    assert np.allclose(released_anchors[3] @ G_new, aligned[0])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model"
        model.save(path)
        assert (path / "model.json").is_file()
        loaded: dcalign.Aligner = dcalign.Aligner.load(path)
    assert loaded.fitted and loaded.method == "odc" and loaded.precision == "float64"
    assert (loaded.users, loaded.anchor_rows, loaded.dim) == (3, ANCHOR_ROWS, DIM)
    assert loaded.target.shape == (ANCHOR_ROWS, DIM)
    G_again, _ = loaded.enroll(np.stack(released_anchors[3:]))
    assert G_again.shape == (1, DIM, DIM) and np.allclose(G_again[0], G_new)

    # Bad input raises ValueError with the library's message.
    try:
        dcalign.align(np.zeros((ANCHOR_ROWS, DIM)))
    except ValueError as e:
        assert "3-D" in str(e), e
    else:
        raise AssertionError("align accepted a 2-D array")
    print("typed_usage: ok")


if __name__ == "__main__":
    main()
