#!/usr/bin/env bash
# A three-participant collaboration through dcalign-server on this machine, end to end: a
# development certificate, the server on 127.0.0.1 with TLS, the analyst creating the
# collaboration, each participant drawing its secret basis from its own private data and
# uploading its release (A_i, X~_i and labels), the alignment and the training of h on the
# server, each participant fetching its own G_i and h and predicting on new data of its own with
# `dcalign predict`. Needs a build (scripts/build.sh). About 10 s.
#
#   scripts/service-demo.sh [WORK_DIR]      (default: a temporary directory, removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DCALIGN_BIN:-build/src/cli}
[[ -x $bin/dcalign-server ]] || { echo "service-demo.sh: build first (scripts/build.sh); dcalign-server is built when gRPC and SQLite are installed" >&2; exit 1; }
work=${1:-$(mktemp -d)}
keep=${1:+yes}
mkdir -p "$work"
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" || true
  [[ -z $keep ]] && rm -rf "$work"
}
trap cleanup EXIT

# 1. The analyst's server: a development certificate, a token, the data directory.
bash scripts/dev-cert.sh "$work/cert" >/dev/null
head -c 24 /dev/urandom | base64 | tr '+/' '-_' >"$work/analyst.token"
chmod 600 "$work/analyst.token"
$bin/dcalign-server --listen 127.0.0.1:0 --port-file "$work/port" --data-dir "$work/data" \
  --analyst-token-file "$work/analyst.token" --tls-cert "$work/cert/server.crt" \
  --tls-key "$work/cert/server.key" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
[[ -s $work/port ]] || { cat "$work/server.log" >&2; exit 1; }
tls=(--server "127.0.0.1:$(cat "$work/port")" --ca-cert "$work/cert/server.crt")
echo "server on 127.0.0.1:$(cat "$work/port") (TLS), data in $work/data"

# 2. The analyst creates the collaboration: ODC, l = 5, a uniform anchor of 200 x 20 from seed 7,
#    and h a logistic regression of two classes.
cat >"$work/spec.json" <<'JSON'
{"name": "demo", "method": "odc", "dim": 5,
 "anchor": {"kind": "uniform", "rows": 200, "features": 20, "seed": 7},
 "participants": ["alice", "bob", "carol"], "model": "logreg", "num_classes": 2,
 "max_rows": 1000, "seed": 3}
JSON
id=$($bin/dcalign client create "${tls[@]}" --token-file "$work/analyst.token" \
  --spec "$work/spec.json" --tokens-out "$work/tokens")
echo "collaboration $id; one token per participant in $work/tokens/"

# 3. Each participant: private data (here 300 x 20 rows near one 5-dimensional subspace that
#    the three share, the class the sign of one latent coordinate), its secret basis F_i, its
#    release A_i = A F_i, X~_i = X_i F_i and labels uploaded; F_i stays with it. It also keeps
#    200 new rows Y_i of its own, to predict on later.
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
W = rng.standard_normal((5, 20))
for name in ("alice", "bob", "carol"):
    for what, n in (("", 300), (".new", 200)):
        Z = rng.standard_normal((n, 5))
        np.save(f"{sys.argv[1]}/{name}{what}.npy", Z @ W + 1e-4 * rng.standard_normal((n, 20)))
        np.save(f"{sys.argv[1]}/{name}{what}.labels.npy", (Z[:, 0] > 0).astype(float))
PY
seed=11
for p in alice bob carol; do
  $bin/dcalign client upload "${tls[@]}" --token-file "$work/tokens/$p.token" --collaboration "$id" \
    --private "$work/$p.npy" --labels "$work/$p.labels.npy" --secret-out "$work/$p.F.npy" \
    --seed $((seed++)) >/dev/null
  echo "$p uploaded A_i = A F_i, X~_i = X_i F_i and its labels"
done

# 4. The job (alignment, then h) was queued by the last upload; wait for it, then each
#    participant fetches its G_i and h, and predicts h(Y_i F_i G_i) on its new rows.
for _ in $(seq 300); do
  state=$($bin/dcalign client status "${tls[@]}" --token-file "$work/analyst.token" \
    --collaboration "$id" | sed -n 's/.*, job \([a-z]*\).*/\1/p')
  [[ $state == done || $state == failed ]] && break
  sleep 0.1
done
$bin/dcalign client status "${tls[@]}" --token-file "$work/analyst.token" --collaboration "$id"
[[ $state == done ]] || exit 1
for p in alice bob carol; do
  $bin/dcalign client fetch "${tls[@]}" --token-file "$work/tokens/$p.token" --collaboration "$id" \
    --out "$work/result-$p"
  $bin/dcalign predict --model "$work/result-$p/model" --basis "$work/$p.F.npy" \
    --change-of-basis "$work/result-$p/G.npy" --data "$work/$p.new.npy" --out "$work/$p.pred.npy"
done

# 5. The checks: the participants share one subspace, so after the alignment their bases agree,
#    F_i G_i = F_j G_j up to the noise, where the secret bases F_i themselves are unrelated; and
#    the one h predicts every participant's new rows.
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
w, users = sys.argv[1], ("alice", "bob", "carol")
F = {p: np.load(f"{w}/{p}.F.npy") for p in users}
FG = {p: F[p] @ np.load(f"{w}/result-{p}/G.npy") for p in users}
rel = lambda M, N: np.linalg.norm(M - N) / np.linalg.norm(N)
after = max(rel(FG[p], FG["alice"]) for p in users[1:])
before = min(rel(F[p], F["alice"]) for p in users[1:])
print(f"||F_i G_i - F_1 G_1|| / ||F_1 G_1||: at most {after:.1e}; ||F_i - F_1|| / ||F_1||: at least {before:.2f}")
acc = {p: float(np.mean(np.load(f"{w}/{p}.pred.npy").ravel() == np.load(f"{w}/{p}.new.labels.npy")))
       for p in users}
print("accuracy of h on each participant's new rows: " + ", ".join(f"{p} {a:.3f}" for p, a in acc.items()))
sys.exit(0 if after < 1e-2 < before and min(acc.values()) > 0.9 else 1)
PY
echo "service demo: OK"
