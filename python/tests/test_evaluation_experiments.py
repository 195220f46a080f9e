"""pytest suite of the Python bindings, part 3: the communication model, the statistics, the
privacy measurements and the experiments, each against the command or an independent reference."""
import json
import os
import subprocess

import numpy as np
import pytest

import dcalign
from helpers import make_anchors


# ---------------------------------------------------------------- evaluation


def test_communication_matches_the_command():
    # `dcalign comm -c 10 --samples 100,200,...,1000 -a 500 -m 64 -l 20 -N 1e5 -q 16 --gamma 0
    #  -p 0.5 -R 40 --bandwidth 1e8 --rtt 0.05 --json x.json`, whose document this is too.
    r = dcalign.communication(samples=[100 * k for k in range(1, 11)], anchor_rows=500,
                              features=64, dim=20, model_parameters=1e5, bits=16, gamma=0,
                              participation=0.5, rounds=40, bandwidth=1e8, rtt=0.05)
    assert r["inputs"]["users"] == 10 and r["inputs"]["mean_samples"] == 550.0
    assert r["bytes"]["uplink_per_user"] == 42000.0
    assert r["bytes"]["uplink_max_user"] == 60000.0
    assert r["bytes"]["downlink"] == 2008000.0
    assert r["bytes"]["dc"] == 2428000.0
    assert r["bytes"]["fl"] == 80000000.0
    assert r["break_even_rounds"] == pytest.approx(1.214, rel=1e-12)
    assert r["break_even_rounds_ceil"] == 2.0 and r["dc_sends_less"] is True
    assert r["transfer"]["dc_seconds"] == pytest.approx(0.34424, rel=1e-12)
    assert r["transfer"]["fl_client_seconds"] == pytest.approx(5.28, rel=1e-12)
    # The defaults are the paper's worked example; no bandwidth, no transfer times.
    d = dcalign.communication()
    assert d["inputs"]["users"] == 100 and d["transfer"] is None
    with pytest.raises(ValueError, match="participation"):
        dcalign.communication(participation=0)
    with pytest.raises(TypeError, match="unknown option 'user'"):
        dcalign.communication(user=3)


def test_communication_model_size_per_protocol():
    # An MNIST layout: DC's MLP on l = 30 has N_DC = 10506 parameters, FedAvg's on m = 784
    # N_FL = 203530. By hand: B_DC = 10 ((1000 + 1000) 30 + 30^2 + 10506) 4 = 2856240 bytes,
    # B_FL per round = 2 * 10 * 203530 * 4 = 16282400, R* = 2856240 / 16282400.
    layout = dict(users=10, mean_samples=1000, anchor_rows=1000, features=784, dim=30, gamma=0)
    r = dcalign.communication(dc_model_parameters=10506, fl_model_parameters=203530, **layout)
    assert r["inputs"]["dc_model_parameters"] == 10506.0
    assert r["inputs"]["fl_model_parameters"] == 203530.0
    assert r["inputs"]["model_parameters"] is None  # no one N
    assert r["bytes"]["dc"] == 2856240.0 and r["bytes"]["fl_per_round"] == 16282400.0
    assert r["break_even_rounds"] == pytest.approx(2856240 / 16282400, rel=1e-14)
    # model_parameters is N for both; an override replaces it for its protocol only.
    s = dcalign.communication(model_parameters=203530, dc_model_parameters=10506, **layout)
    assert s["bytes"] == r["bytes"] and s["break_even_rounds"] == r["break_even_rounds"]
    one = dcalign.communication(model_parameters=203530, dc_model_parameters=None, **layout)
    assert one["inputs"]["model_parameters"] == 203530.0
    assert one["bytes"]["dc"] == 10577200.0  # DC's downlink at FedAvg's size: 3.7x the bytes
    with pytest.raises(ValueError, match="model_parameters sets no protocol's model"):
        dcalign.communication(model_parameters=5, dc_model_parameters=1, fl_model_parameters=2)
    with pytest.raises(ValueError, match="dc_model_parameters N_DC"):
        dcalign.communication(dc_model_parameters=0.5)
    with pytest.raises(ValueError, match="fl_model_parameters N_FL"):
        dcalign.communication(fl_model_parameters=float("nan"))


# Reference values: SciPy 1.10.1 (scipy.stats.ttest_rel, f_oneway, f.sf) on these inputs.
X_T = [0.91, 0.88, 0.93, 0.90, 0.87, 0.92, 0.89, 0.94]
Y_T = [0.89, 0.88, 0.90, 0.88, 0.86, 0.90, 0.88, 0.91]


def test_paired_t_test_matches_scipy():
    r = dcalign.paired_t_test(X_T, Y_T)
    assert r["n"] == 8 and r["df"] == 7
    assert r["t"] == pytest.approx(4.781910357447818, rel=1e-12)
    assert r["p"] == pytest.approx(0.0020078344736297244, rel=1e-9)
    d = np.subtract(X_T, Y_T)
    assert r["cohens_dz"] == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
    assert r["ci_lower"] < d.mean() < r["ci_upper"]
    g = dcalign.paired_t_test(np.array(X_T), np.array(Y_T), alternative="greater")
    assert g["p"] == pytest.approx(0.0010039172368148622, rel=1e-9)
    with pytest.raises(ValueError, match="alternative"):
        dcalign.paired_t_test(X_T, Y_T, alternative="two_sided")
    with pytest.raises(ValueError):
        dcalign.paired_t_test([1.0], [2.0])


def test_anovas_match_scipy_and_the_definitions():
    r = dcalign.one_way_anova([3.1, 2.9, 3.4, 3.0], [3.6, 3.8, 3.5], [2.7, 2.8, 3.0, 2.6, 2.9])
    assert r["F"] == pytest.approx(20.44622093023259, rel=1e-12)
    assert r["p"] == pytest.approx(0.0004497124106168043, rel=1e-9)
    assert r["df_between"] == 2 and r["df_within"] == 9
    y = [5.1, 4.9, 6.2, 6.0, 7.1, 6.8, 5.5, 5.8, 6.1, 6.4, 8.0, 7.7]
    a = ["a1"] * 6 + ["a2"] * 6
    b = ["b1", "b1", "b2", "b2", "b3", "b3"] * 2
    t = dcalign.two_way_anova(y, a, b)
    # Balanced: the sums of squares of the cell-mean decomposition (computed with NumPy).
    assert t["A"]["ss"] == pytest.approx(0.9633333333333355, rel=1e-10)
    assert t["B"]["ss"] == pytest.approx(8.704999999999995, rel=1e-10)
    assert t["A:B"]["ss"] == pytest.approx(0.2916666666666661, rel=1e-9)
    assert t["ss_residual"] == pytest.approx(0.22, rel=1e-9) and t["df_residual"] == 6
    assert t["A"]["p"] == pytest.approx(0.0021661213912288037, rel=1e-8)
    assert t["B"]["p"] == pytest.approx(1.497763932287916e-05, rel=1e-8)
    assert t["A:B"]["p"] == pytest.approx(0.07948893296477164, rel=1e-8)
    t3 = dcalign.two_way_anova(y, a, b, sum_of_squares="type3")
    assert t3["A"]["ss"] == pytest.approx(t["A"]["ss"], rel=1e-9)  # balanced: types agree
    with pytest.raises(ValueError, match="sum of squares"):
        dcalign.two_way_anova(y, a, b, sum_of_squares="type1")


def test_privacy_measurements():
    # Balle and Wang's own example (tests/privacy/test_privacy.cpp holds it for the C++ side).
    g = dcalign.analytic_gaussian(1.0, 1e-5)
    assert g["sigma"] == pytest.approx(3.73063, abs=1e-5)
    assert g["classical_sigma"] > g["sigma"]
    with pytest.raises(ValueError):
        dcalign.analytic_gaussian(0.0, 1e-5)
    rng = np.random.default_rng(8)
    X = rng.standard_normal((30, 6))
    F = rng.standard_normal((6, 2))
    r = dcalign.dr_privacy(X, F, epsilon=0.9)
    P = F @ np.linalg.pinv(F)  # the projector onto span(F)
    want = np.linalg.norm(X - X @ P, axis=1) / np.linalg.norm(X, axis=1)
    np.testing.assert_allclose(r["ratios"], want, rtol=1e-10)
    assert r["min"] == pytest.approx(want.min(), rel=1e-10)
    assert r["kept"] == [k for k in range(30) if want[k] >= 0.9]
    e = dcalign.reconstruction_error(X, X @ P)
    assert e["relative"] == pytest.approx(np.linalg.norm(X - X @ P) / np.linalg.norm(X), rel=1e-10)
    np.testing.assert_allclose(e["per_row"], want, rtol=1e-10)
    with pytest.raises(ValueError, match="2-D"):
        dcalign.dr_privacy(X[0], F, epsilon=0.5)


# ---------------------------------------------------------------- experiments

SMALL_EXPERIMENT = """name = "py_small"
dataset = "synthetic"
users = 4
samples_per_user = 60
test_samples = 400
anchor_rows = 200
dim = 8
conditions = ["DiffSpan-Orth"]
methods = ["central", "local", "imakura", "odc"]
models = ["svm", "knn"]
metrics = ["accuracy"]
trials = 3
seed = 3
privacy = ["collusion", "dr"]

[[statistics]]
test = "paired-t"
a = "odc"
b = "imakura"
"""


def _has_experiments():
    try:
        from dcalign import _experiment  # noqa: F401
    except ImportError:
        return False
    return True


def _cli():
    """The dcalign command of the build ($DCALIGN_CLI; scripts/test-python.sh sets it)."""
    cli = os.environ.get("DCALIGN_CLI")
    if not cli or not os.access(cli, os.X_OK):
        pytest.skip("DCALIGN_CLI does not name the dcalign command (scripts/test-python.sh sets it)")
    return cli


def test_run_experiment_without_the_learning_layer_says_how(tmp_path):
    if _has_experiments():
        pytest.skip("this module has the learning layer")
    with pytest.raises(RuntimeError, match="DCALIGN_WITH_LEARN=ON"):
        dcalign.run_experiment(tmp_path / "x.toml")


def test_run_experiment_matches_the_command(tmp_path):
    if not _has_experiments():
        pytest.skip("this module was built without the learning layer")
    cli = _cli()
    cfg = tmp_path / "py_small.toml"
    cfg.write_text(SMALL_EXPERIMENT)
    messages = []
    result = dcalign.run_experiment(cfg, progress=messages.append, out=tmp_path / "py")
    assert isinstance(result, dcalign.ExperimentResult)
    assert any("trial 3 of 3" in m for m in messages), messages
    # 3 trials x (Central, Local, Imakura-DC, ODC) x 2 models, and the privacy measurements
    scores = [r for r in result.records if r["metric"] == "accuracy"]
    assert len(scores) == 24 and result.name == "py_small"
    assert {"collusion_error", "dr_min_ratio"} <= {r["metric"] for r in result.records}
    assert {r["method"] for r in scores} == {"central", "local", "imakura", "odc"}
    assert all(0 <= r["value"] <= 1 for r in scores)
    subprocess.run([cli, "experiment", str(cfg), "--out", str(tmp_path / "cli")], check=True,
                   capture_output=True)
    with open(tmp_path / "cli" / "py_small.json") as f:
        command = json.load(f)
    key = ("trial", "condition", "method", "model", "metric")
    ours = {tuple(r[k] for k in key): r["value"] for r in result.records}
    theirs = {tuple(r[k] for k in key): r["value"] for r in command["records"]}
    assert ours.keys() == theirs.keys()
    for k in ours:  # the same seeds and code: the same scores and privacy measurements
        assert ours[k] == pytest.approx(theirs[k], abs=1e-12), k
    assert len(result.statistics) == len(command["statistics"]) == 2
    for s, t in zip(result.statistics, command["statistics"]):
        assert s["model"] == t["model"] and s["p"] == pytest.approx(t["p"], rel=1e-12)
    # out= wrote the command's three files, the JSON the same document.
    with open(tmp_path / "py" / "py_small.json") as f:
        assert json.load(f)["records"] == result.records
    assert (tmp_path / "py" / "py_small.csv").exists() and (tmp_path / "py" / "py_small.md").exists()
    assert "odc" in result.summary
    assert dcalign.check_experiment(cfg) == 1
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pandas"):
            result.to_pandas()
    else:
        frame = result.to_pandas()
        assert len(frame) == len(result.records) and list(frame.columns[:5]) == list(key)


def test_enroll_matches_the_command(tmp_path):
    cli = _cli()
    A = make_anchors(seed=28)
    model = dcalign.Aligner()
    model.fit(A[:3], method="odc", target_rotation="identity")
    model.save(tmp_path / "model")
    new = np.ascontiguousarray(A[3:])
    np.save(tmp_path / "new.npy", new)
    subprocess.run([cli, "enroll", "--model", str(tmp_path / "model"), "--anchors",
                    str(tmp_path / "new.npy"), "--out", str(tmp_path / "G.npy")], check=True,
                   capture_output=True)
    G_cli = np.load(tmp_path / "G.npy")
    G_py, report = dcalign.Aligner.load(tmp_path / "model").enroll(new)
    assert G_py.shape == G_cli.shape == (A.shape[0] - 3, A.shape[2], A.shape[2])
    np.testing.assert_allclose(G_py, G_cli, atol=1e-12)  # the same library, the same input
    assert len(report["residual"]) == A.shape[0] - 3


def test_run_experiment_errors(tmp_path):
    if not _has_experiments():
        pytest.skip("this module was built without the learning layer")
    with pytest.raises(TypeError, match="path"):
        dcalign.run_experiment({"dataset": "synthetic"})
    with pytest.raises(ValueError, match="trials = 0"):
        dcalign.run_experiment(tmp_path / "x.toml", trials=0)
    with pytest.raises(ValueError, match="device"):
        dcalign.run_experiment(tmp_path / "x.toml", device="tpu")
    with pytest.raises(ValueError, match="cannot open"):
        dcalign.run_experiment(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL_EXPERIMENT.replace('dim = 8', 'dim = "eight"'))
    with pytest.raises(ValueError, match="dim"):
        dcalign.check_experiment(bad)
    cfg = tmp_path / "py_small.toml"
    cfg.write_text(SMALL_EXPERIMENT)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="[Nn]ot a directory"):  # checked before the first trial
        dcalign.run_experiment(cfg, out=blocker)
    with pytest.raises(TypeError, match="progress"):
        dcalign.run_experiment(cfg, progress="yes")
