"""Experiments from Python: run_experiment, check_experiment, ExperimentResult
(re-exported by dcalign)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union


_MAX_TRIALS = 1_000_000  # as `dcalign experiment --trials`


def _experiment_module() -> Any:
    try:
        from . import _experiment
    except ImportError as e:
        raise RuntimeError(
            "this dcalign module was built without the learning layer, which runs experiments: "
            "reinstall it with pip install . --config-settings=cmake.define.DCALIGN_WITH_LEARN=ON "
            f"(needs LibTorch, LIBSVM, XGBoost and toml++) ({e})") from e
    return _experiment


def _experiment_arguments(config: Union[str, os.PathLike], data_dir: Any, trials: Any,
                          device: Any) -> Tuple[str, str, int, str]:
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError(f"config must be the path of an experiment file (TOML), got "
                        f"{type(config).__name__}")
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int):
            raise TypeError(f"trials must be an int, got {type(trials).__name__}")
        if not 1 <= trials <= _MAX_TRIALS:
            raise ValueError(f"trials = {trials}: expected 1 to {_MAX_TRIALS}")
    if device is not None and device not in ("cpu", "cuda"):
        raise ValueError(f"device = {device!r}: expected 'cpu' or 'cuda'")
    return (os.fspath(config), "" if data_dir is None else os.fspath(data_dir),
            0 if trials is None else int(trials), "" if device is None else str(device))


class ExperimentResult:
    """The results of one experiment run: what ``run_experiment`` returns.

    It holds the run's JSON document (the ``<name>.json`` that ``dcalign experiment`` writes)
    as ``document``, with shortcuts to its parts, and the Markdown summary table. Running an
    experiment needs a module built with the learning layer
    (``pip install . --config-settings=cmake.define.DCALIGN_WITH_LEARN=ON``).

    Parameters
    ----------
    document : dict
        The run's JSON document, parsed.
    summary : str
        The Markdown summary table.

    Attributes
    ----------
    document : dict
        The whole document: ``name``, ``source``, ``machine``, ``wall_seconds``, ``config``,
        ``records``, and ``statistics`` and ``rounds`` where the run has them.
    records : list of dict
        trial, condition, method, model, metric, value, seconds (and point for a sweep), one
        per model score.
    statistics : list of dict
        The ``[[statistics]]`` section's results (empty without one).
    rounds : list of dict
        FedAvg's per-round curves (empty without FedAvg).
    config : dict
        The run's configuration, as in the document.
    name : str
        The experiment's name.
    machine : str
        The machine it ran on (its CPU model and thread counts).
    wall_seconds : float
        The run's wall time.
    summary : str
        The Markdown summary table the command prints.

    Notes
    -----
    ``to_pandas()`` gives the records as a pandas DataFrame (pandas must be installed).

    Examples
    --------
    These lines need a module built with the learning layer (this one is not), so they are
    not run here:

    >>> import dcalign
    >>> result = dcalign.run_experiment("experiments/default_synthetic.toml")  # doctest: +SKIP
    >>> result  # doctest: +SKIP
    ExperimentResult(name='default_synthetic', records=..., wall_seconds=...)
    >>> sorted(result.records[0])  # doctest: +SKIP
    ['condition', 'method', 'metric', 'model', 'seconds', 'trial', 'value']
    >>> print(result.summary)  # doctest: +SKIP
    """

    def __init__(self, document: Dict[str, Any], summary: str) -> None:
        self.document = document
        self.summary = summary

    @property
    def records(self) -> List[Dict[str, Any]]:
        """The records, one dict per model score (the document's ``records``)."""
        return self.document["records"]

    @property
    def statistics(self) -> List[Dict[str, Any]]:
        """The results of the ``[[statistics]]`` section (empty without one)."""
        return self.document.get("statistics", [])

    @property
    def rounds(self) -> List[Dict[str, Any]]:
        """FedAvg's per-round curves (empty without FedAvg)."""
        return self.document.get("rounds", [])

    @property
    def config(self) -> Dict[str, Any]:
        """The run's configuration, as the document gives it."""
        return self.document["config"]

    @property
    def name(self) -> str:
        """The experiment's name (that of its output files)."""
        return self.document["name"]

    @property
    def machine(self) -> str:
        """The machine the run ran on: its CPU model and thread counts."""
        return self.document["machine"]

    @property
    def wall_seconds(self) -> float:
        """The run's wall time in seconds."""
        return self.document["wall_seconds"]

    def to_pandas(self) -> Any:
        """Return the records as a pandas DataFrame, one row per record.

        Returns
        -------
        pandas.DataFrame
            The columns are the records' keys: trial, condition, method, model, metric,
            value, seconds (and point for a sweep).

        Raises
        ------
        ImportError
            pandas is not installed (the records stay available as ``records``).

        Examples
        --------
        This needs a module built with the learning layer and pandas, so it is not run here:

        >>> frame = result.to_pandas()  # doctest: +SKIP
        >>> frame.groupby(["method", "model"])["value"].mean()  # doctest: +SKIP
        """
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("ExperimentResult.to_pandas() needs pandas (pip install pandas); "
                              "the records are in .records as a list of dicts") from e
        return pd.DataFrame.from_records(self.records)

    def __repr__(self) -> str:
        return (f"ExperimentResult(name={self.name!r}, records={len(self.records)}, "
                f"wall_seconds={self.wall_seconds:.3g})")


def run_experiment(config: Union[str, os.PathLike], *,
                   data_dir: Optional[Union[str, os.PathLike]] = None,
                   trials: Optional[int] = None, device: Optional[str] = None,
                   out: Optional[Union[str, os.PathLike]] = None,
                   progress: Any = None) -> ExperimentResult:
    """Run an experiment file as ``dcalign experiment`` does and return its results.

    The same configuration, seeds and code as the command, so the same records. The run
    releases the GIL; progress messages reach ``progress`` with the GIL held. It needs a
    module built with the learning layer
    (``pip install . --config-settings=cmake.define.DCALIGN_WITH_LEARN=ON``, with LibTorch,
    LIBSVM, XGBoost and toml++); ``import dcalign`` never loads it, the first call does.

    Parameters
    ----------
    config : str or os.PathLike
        The TOML file (see ``experiments/``).
    data_dir : str or os.PathLike, optional
        The dataset folder (default: the file's ``data_dir``, ``$DCALIGN_DATA``, then the
        compiled default).
    trials : int, optional
        Overrides the file's trial count (1 to 10^6).
    device : {"cpu", "cuda"}, optional
        Overrides the file's device.
    out : str or os.PathLike, optional
        A folder: also writes ``<name>.json``, ``.csv`` and ``.md`` there, atomically, as the
        command does (created if missing, and checked to be writable before the first trial).
    progress : None, bool or callable, optional
        None or False (silent), True (messages to stderr, as the command) or a callable
        taking each message (a str).

    Returns
    -------
    ExperimentResult
        The document of the run, its records and its summary table.

    Raises
    ------
    TypeError
        ``config`` is not a str or path, ``trials`` is not an int, or ``progress`` is
        neither None, a bool nor a callable.
    ValueError
        ``trials`` outside 1 to 10^6 or ``device`` not "cpu" or "cuda"; an experiment file
        that is missing, unreadable or invalid (a bad key or value), with the command's
        message.
    OSError
        A dataset file cannot be read, or ``out`` cannot be created or written.
    RuntimeError
        The module was built without the learning layer (the message says how to rebuild
        it), or ``device="cuda"`` where no usable GPU is.
    dcalign.NumericalError
        A numerical failure during a trial.

    Examples
    --------
    Running needs a module built with the learning layer (this one is not), so these lines
    are not run here:

    >>> import dcalign
    >>> result = dcalign.run_experiment("experiments/default_synthetic.toml",
    ...                                 trials=2, out="results")  # doctest: +SKIP
    >>> {r["method"] for r in result.records}  # doctest: +SKIP

    The arguments are checked before the learning layer is needed, in any module:

    >>> dcalign.run_experiment("experiments/default_synthetic.toml", trials=0)
    Traceback (most recent call last):
        ...
    ValueError: trials = 0: expected 1 to 1000000
    """
    path, ddir, n, dev = _experiment_arguments(config, data_dir, trials, device)
    if progress is True:
        import sys

        def progress(msg: str) -> None:
            print(f"dcalign: {msg}", file=sys.stderr, flush=True)
    elif progress is False:
        progress = None
    if progress is not None and not callable(progress):
        raise TypeError("progress must be None, True, False or a callable taking a str")
    document, summary = _experiment_module()._run(path, ddir, n, dev,
                                                  "" if out is None else os.fspath(out), progress)
    return ExperimentResult(json.loads(document), summary)


def check_experiment(config: Union[str, os.PathLike], *,
                     data_dir: Optional[Union[str, os.PathLike]] = None,
                     trials: Optional[int] = None, device: Optional[str] = None) -> int:
    """Check an experiment file without running a trial (``dcalign experiment --check``).

    It checks the file's keys, its dataset, the sizes and every sweep point, as a run would
    before its first trial. Like ``run_experiment`` it needs a module built with the learning
    layer.

    Parameters
    ----------
    config : str or os.PathLike
        The TOML file.
    data_dir : str or os.PathLike, optional
        The dataset folder, as for ``run_experiment``.
    trials : int, optional
        Overrides the file's trial count (1 to 10^6).
    device : {"cpu", "cuda"}, optional
        Overrides the file's device.

    Returns
    -------
    int
        The number of sweep points (1 for a file without a sweep).

    Raises
    ------
    TypeError
        ``config`` is not a str or path, or ``trials`` is not an int.
    ValueError
        ``trials`` or ``device`` out of range, or what is wrong with the file (a missing or
        unreadable file, a bad key or value), named in the message.
    OSError
        A dataset file the check reads cannot be read.
    RuntimeError
        The module was built without the learning layer.

    Examples
    --------
    This needs a module built with the learning layer (this one is not), so it is not run
    here:

    >>> import dcalign
    >>> dcalign.check_experiment("experiments/default_synthetic.toml")  # doctest: +SKIP
    1
    """
    path, ddir, n, dev = _experiment_arguments(config, data_dir, trials, device)
    return int(_experiment_module()._check(path, ddir, n, dev))
