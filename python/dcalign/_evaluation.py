"""Evaluation: the communication model, statistics, privacy measurements
(re-exported by dcalign)."""
from __future__ import annotations

import json
from typing import Any, Dict, List

import numpy as np

from . import _core
from ._arrays import _to_numpy
from ._align import ArrayLike


def communication(**options: Any) -> Dict[str, Any]:
    """Paper 001's communication model (eqs. 10-18): the document of ``dcalign comm --json``.

    The bytes one Data Collaboration (DC) run sends (the uplink of the released
    representations, the downlink of the model and the G_i, the distribution of the anchor),
    the bytes of R rounds of federated learning (FL) with participation p, the break-even
    number of rounds above which DC sends less, and, given a bandwidth, the transfer times.

    Parameters
    ----------
    **options
        The options of ``dcalign comm``, with underscores; the defaults are the paper's
        worked example (c = 100 users with n = 1000 samples, a = 1000 anchor rows of
        m = 784 features, l = 100, a model of N = 2.5e7 parameters, FP32, unicast anchor
        distribution, p = 1, R = 1):

        - ``users`` (int >= 1, default 100): c. A ``samples`` list gives c unless ``users``
          is given too.
        - ``mean_samples`` (float >= 0, default 1000): n, the mean samples per user; unused
          when ``samples`` is given.
        - ``samples`` (array_like of float >= 0, or None): the n_i, one per user (flattened;
          any array kind); None: not given.
        - ``anchor_rows`` (int >= 0, default 1000): a.
        - ``features`` (int >= 0, default 784): m.
        - ``dim`` (int >= 0, default 100): l.
        - ``model_parameters`` (float >= 1, default 2.5e7): N, for both protocols.
        - ``dc_model_parameters`` (float >= 1, or None): N_DC of DC's model h (eqs. 11 and
          14), overriding N for DC; None: N.
        - ``fl_model_parameters`` (float >= 1, or None): N_FL of FL's model (eq. 15),
          overriding N for FL; None: N. Giving all three at once is a ValueError.
        - ``bits`` (float > 0, default 32): q, the bits per scalar.
        - ``gamma`` (float >= 0, or None, the default): the anchor replication factor; None:
          c (unicast); 0: a public or seeded anchor.
        - ``participation`` (0 < p <= 1, default 1): p, the fraction of FL clients per round.
        - ``rounds`` (float >= 0, default 1): R, the FL rounds.
        - ``bandwidth`` (float > 0, bits/s): adds the transfer times (eq. 18).
        - ``rtt`` (float >= 0, seconds, default 0): the round-trip time of those times.

    Returns
    -------
    dict
        ``"inputs"`` (the values used, with ``"dc_model_parameters"``,
        ``"fl_model_parameters"`` and ``"model_parameters"``, their common value or None when
        they differ), ``"bytes"`` (``uplink_per_user``, ``uplink_max_user``, ``uplink``,
        ``downlink_per_user``, ``downlink``, ``anchor``, ``anchor_distribution``, ``dc``,
        ``fl_per_round``, ``fl``), ``"gb"`` and ``"gib"`` (``dc`` and ``fl`` in 10**9 and
        2**30 bytes), ``"break_even_rounds"`` (R*, eq. 16), ``"break_even_rounds_ceil"``,
        ``"dc_sends_less"`` (whether DC sends no more than FL at R rounds) and ``"transfer"``
        (None without ``bandwidth``, else ``bandwidth_bits_per_second``, ``rtt_seconds``,
        ``dc_seconds``, ``fl_seconds``, ``dc_client_seconds``, ``fl_client_seconds``).

    Raises
    ------
    ValueError
        A value out of its range (the message names it); a ``samples`` list whose length is
        not ``users``; ``model_parameters`` with both per-protocol sizes; a byte count that
        overflows a double.
    TypeError
        An unknown option, or an option of the wrong type (e.g. text for a number).

    Examples
    --------
    >>> import dcalign
    >>> doc = dcalign.communication()              # the paper's worked example
    >>> doc["gb"], doc["break_even_rounds"], doc["dc_sends_less"]
    ({'dc': 10.3976, 'fl': 20.0}, 0.51988, True)
    >>> doc = dcalign.communication(users=10, gamma=0, bandwidth=1e8)
    >>> doc["inputs"]["gamma"], doc["bytes"]["anchor_distribution"]
    (0.0, 0.0)
    >>> doc["transfer"]["fl_seconds"]
    160.0
    >>> dcalign.communication(users=0)
    Traceback (most recent call last):
        ...
    ValueError: comm: users c = 0 is out of range: expected an integer >= 1
    """
    if "samples" in options and options["samples"] is not None:
        options["samples"] = [float(v)
                              for v in np.ravel(_to_numpy(options["samples"], "samples")[0])]
    elif "samples" in options:
        del options["samples"]
    return json.loads(_core._communication(options))


def _values(x: ArrayLike, what: str) -> List[float]:
    return [float(v) for v in np.ravel(_to_numpy(x, what)[0])]


def paired_t_test(x: ArrayLike, y: ArrayLike, alternative: str = "two-sided",
                  confidence: float = 0.95) -> Dict[str, Any]:
    """Paired t-test of x against y, with the effect size d_z and a confidence interval.

    x[i] pairs with y[i]; the test is that of ``scipy.stats.ttest_rel`` on the differences
    x - y. The result adds the paired effect size d_z and the two-sided confidence interval of
    the mean difference (whatever the alternative).

    Parameters
    ----------
    x, y : array_like
        The paired observations, at least 2 pairs and the same count in both; flattened; any
        finite numbers (a list, a NumPy array, a DLPack array).
    alternative : {"two-sided", "less", "greater"}, default "two-sided"
        The alternative hypothesis about the mean of x - y: not 0, below 0 or above 0.
    confidence : float, default 0.95
        The level of the confidence interval, in (0, 1).

    Returns
    -------
    dict
        ``n`` (pairs), ``mean_diff`` and ``sd_diff`` (of x - y), ``t``, ``df``, ``p``,
        ``cohens_dz`` (mean_diff / sd_diff), ``confidence``, ``ci_lower``, ``ci_upper`` and
        ``alternative``.

    Raises
    ------
    ValueError
        x and y of different lengths, fewer than 2 pairs, a NaN or an infinity, text that is
        not a number, an unknown ``alternative`` or a ``confidence`` outside (0, 1).

    Examples
    --------
    >>> import dcalign
    >>> odc = [0.91, 0.88, 0.93, 0.90, 0.92]      # accuracies of five trials
    >>> imakura = [0.85, 0.86, 0.90, 0.84, 0.89]
    >>> r = dcalign.paired_t_test(odc, imakura)
    >>> r["n"], r["df"], round(r["t"], 4), round(r["p"], 4), round(r["cohens_dz"], 4)
    (5, 4.0, 4.7809, 0.0088, 2.1381)
    >>> round(r["ci_lower"], 4), round(r["ci_upper"], 4)
    (0.0168, 0.0632)
    >>> round(dcalign.paired_t_test(odc, imakura, alternative="greater")["p"], 4)
    0.0044
    """
    return _core._paired_t_test(_values(x, "x"), _values(y, "y"), str(alternative),
                                float(confidence))


def one_way_anova(*groups: ArrayLike) -> Dict[str, Any]:
    """One-way ANOVA of k >= 2 groups, as scipy.stats.f_oneway, with eta^2 and Cohen's f.

    Parameters
    ----------
    *groups : array_like
        The observations of each group, flattened; any finite numbers (a list, a NumPy array,
        a DLPack array). At least 2 groups, and more observations in all than groups.

    Returns
    -------
    dict
        ``ss_between``, ``ss_within``, ``ss_total``, ``df_between``, ``df_within``, ``F``,
        ``p``, ``eta_squared`` (ss_between / ss_total) and ``cohens_f``
        (sqrt(eta^2 / (1 - eta^2))).

    Raises
    ------
    ValueError
        Fewer than 2 groups, no error degrees of freedom left, a NaN or an infinity, or text
        that is not a number.

    Examples
    --------
    >>> import dcalign
    >>> r = dcalign.one_way_anova([1, 2, 3], [2, 3, 4], [5, 6, 7])
    >>> r["F"], r["df_between"], r["df_within"], round(r["p"], 6), r["eta_squared"]
    (13.0, 2.0, 6.0, 0.006592, 0.8125)
    """
    return _core._one_way_anova([_values(g, f"group {i}") for i, g in enumerate(groups)])


def two_way_anova(y: ArrayLike, a: Any, b: Any, sum_of_squares: str = "type2") -> Dict[str, Any]:
    """Two-way ANOVA with interaction, y ~ A + B + A:B, for balanced and unbalanced designs.

    Observation y[i] was made at level a[i] of factor A and level b[i] of factor B.

    Parameters
    ----------
    y : array_like of shape (n,)
        The observations, flattened; any finite numbers.
    a, b : sequence of length n
        The level of each observation in factor A and in factor B: any labels, compared as
        strings (``str(label)``). Each factor needs at least 2 levels.
    sum_of_squares : {"type2", "type3"}, default "type2"
        The type of the sums of squares.

    Returns
    -------
    dict
        ``type``, ``levels_a``, ``levels_b``, ``n``, then ``"A"``, ``"B"`` and ``"A:B"``
        (each a dict of ``ss``, ``df``, ``F``, ``p``, ``partial_eta_squared`` and
        ``cohens_f``), ``ss_residual`` and ``df_residual``.

    Raises
    ------
    ValueError
        ``a`` or ``b`` of another length than y; a factor with a single level; no residual
        degrees of freedom (no cell with two observations); a NaN or an infinity in y; an
        unknown ``sum_of_squares``.

    Examples
    --------
    >>> import dcalign
    >>> y = [1, 2, 3, 4, 5, 6, 7, 8]
    >>> method = ["odc", "odc", "imakura", "imakura"] * 2
    >>> users = [2, 2, 2, 2, 4, 4, 4, 4]
    >>> r = dcalign.two_way_anova(y, method, users)
    >>> r["levels_a"], r["levels_b"], r["n"], r["df_residual"]
    (2, 2, 8, 4.0)
    >>> round(r["A"]["F"], 6), round(r["B"]["F"], 6), round(r["A:B"]["F"], 6)
    (16.0, 64.0, 0.0)
    """
    return _core._two_way_anova(_values(y, "y"), [str(v) for v in a], [str(v) for v in b],
                                str(sum_of_squares))


def analytic_gaussian(epsilon: float, delta: float, sensitivity: float = 1.0) -> Dict[str, Any]:
    """The analytic Gaussian mechanism's noise scale for (epsilon, delta)-DP.

    Balle and Wang's Algorithm 1 (ICML 2018), as the experiments' differential privacy uses
    it: the smallest sigma for which f(x) + sigma N(0, I) is (epsilon, delta)-DP when f has
    global L2 sensitivity Delta. The boundary is found by bisection to adjacent doubles, on
    the side that keeps the guarantee.

    Parameters
    ----------
    epsilon : float
        epsilon > 0, finite.
    delta : float
        delta, in (0, 1).
    sensitivity : float, default 1.0
        Delta, the L2 sensitivity, > 0 and finite.

    Returns
    -------
    dict
        ``sigma`` (the noise scale, alpha Delta / sqrt(2 epsilon)), ``alpha``, ``delta0``
        (the delta that alpha = 1 achieves, which decides the branch), ``upper_branch``
        (bool: delta >= delta0, where alpha <= 1), ``boundary`` (v* or u* of the algorithm) and
        ``classical_sigma`` (Dwork and Roth's calibration
        Delta sqrt(2 ln(1.25 / delta)) / epsilon, for comparison only).

    Raises
    ------
    ValueError
        A parameter out of its range (the message names it), or text that is not a number.
    dcalign.NumericalError
        sigma overflows a double.

    Examples
    --------
    >>> import dcalign
    >>> g = dcalign.analytic_gaussian(1.0, 1e-5)
    >>> round(g["sigma"], 4), round(g["classical_sigma"], 4), g["upper_branch"]
    (3.7306, 4.8448, False)
    >>> round(dcalign.analytic_gaussian(1.0, 1e-5, sensitivity=2.0)["sigma"], 4)
    7.4613
    """
    return _core._analytic_gaussian(float(epsilon), float(delta), float(sensitivity))


def dr_privacy(X: ArrayLike, basis: ArrayLike, epsilon: float) -> Dict[str, Any]:
    """Paper 004's epsilon-DR ratios of the rows of X for a basis F, summarised at epsilon.

    For each row x of X, r(x) = ||x - x F F^+|| / ||x|| is the part of x that no linear
    reconstruction from x F can recover, in [0, 1] (a zero row has r = 0). F is epsilon-DR on
    X when every r(x) >= epsilon; the down-sampling defence drops the rows with
    r(x) < epsilon before release. Inputs are copied once as float64.

    Parameters
    ----------
    X : array of shape (n, m)
        The data, one sample per row; finite numbers, any array kind on the host (CUDA
        device memory is copied to the host).
    basis : array of shape (m, l)
        F, the secret basis or an attacker's estimate of it (l >= 1); finite numbers.
    epsilon : float
        The threshold, > 0 and finite.

    Returns
    -------
    dict
        ``ratios`` (list of r(x), one per row), ``min`` (the largest epsilon for which F is
        epsilon-DR on X), ``median``, ``below`` (the rows with r(x) < epsilon),
        ``fraction_below`` and ``kept`` (the indices of the rows with r(x) >= epsilon, in
        increasing order: the rows the down-sampling defence keeps).

    Raises
    ------
    ValueError
        X or ``basis`` not 2-D; ``basis`` without m rows or without columns; a NaN or an
        infinity; ``epsilon`` not > 0 and finite.
    TypeError
        X or ``basis`` cannot be converted to float64.

    Examples
    --------
    >>> import numpy as np
    >>> import dcalign
    >>> X = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    >>> F = np.array([[1.0], [0.0], [0.0]])        # keeps the first feature
    >>> d = dcalign.dr_privacy(X, F, epsilon=0.5)
    >>> [round(r, 4) for r in d["ratios"]], d["min"], d["below"], d["kept"]
    ([0.0, 0.7071, 1.0], 0.0, 1, [1, 2])
    """
    return _core._dr_privacy(_to_numpy(X, "X")[0], _to_numpy(basis, "basis")[0], float(epsilon))


def reconstruction_error(truth: ArrayLike, reconstruction: ArrayLike) -> Dict[str, Any]:
    """How far a reconstruction X^ is from the true data X (both n x m).

    Parameters
    ----------
    truth : array of shape (n, m)
        X, with n, m >= 1; finite numbers, any array kind on the host (CUDA device memory is
        copied to the host); copied once as float64.
    reconstruction : array of shape (n, m)
        X^, of the same shape; finite numbers.

    Returns
    -------
    dict
        ``relative`` (||X^ - X||_F / ||X||_F; 0 when both are zero), ``per_row`` (list of
        ||x^_k - x_k|| / ||x_k||, one per row; a zero row counts 0 when reconstructed as zero,
        else 1) and ``median_row`` (their median; the mean of the middle two for even n).

    Raises
    ------
    ValueError
        An array that is not 2-D or is empty, shapes that differ, or a NaN or an infinity.
    TypeError
        An array that cannot be converted to float64.

    Examples
    --------
    >>> import dcalign
    >>> e = dcalign.reconstruction_error([[1.0, 0.0], [0.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]])
    >>> round(e["relative"], 4), e["per_row"], e["median_row"]
    (0.4472, [0.0, 0.5], 0.25)
    """
    return _core._reconstruction_error(_to_numpy(truth, "truth")[0],
                                       _to_numpy(reconstruction, "reconstruction")[0])
