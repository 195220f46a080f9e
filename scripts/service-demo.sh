#!/usr/bin/env bash
# A three-participant collaboration through dcalign-server on this machine, end to end: a
# development certificate, the server on 127.0.0.1 with TLS, the analyst creating the
# collaboration, each participant drawing its secret basis from its own private data and
# uploading its release, the alignment, each participant fetching its own G_i, and a check that
# the aligned anchors agree. Needs a build (scripts/build.sh). About 10 s.
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

# 2. The analyst creates the collaboration: ODC, l = 5, a uniform anchor of 200 x 20 from seed 7.
cat >"$work/spec.json" <<'JSON'
{"name": "demo", "method": "odc", "dim": 5,
 "anchor": {"kind": "uniform", "rows": 200, "features": 20, "seed": 7},
 "participants": ["alice", "bob", "carol"], "model": "none", "max_rows": 1000, "seed": 3}
JSON
id=$($bin/dcalign client create "${tls[@]}" --token-file "$work/analyst.token" \
  --spec "$work/spec.json" --tokens-out "$work/tokens")
echo "collaboration $id; one token per participant in $work/tokens/"

# 3. Each participant: private data (here 300 x 20 rows near one 5-dimensional subspace that
#    the three share), its secret basis F_i, its release A_i = A F_i uploaded; F_i stays with it.
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
W = rng.standard_normal((5, 20))
for name in ("alice", "bob", "carol"):
    X = rng.standard_normal((300, 5)) @ W + 1e-4 * rng.standard_normal((300, 20))
    np.save(f"{sys.argv[1]}/{name}.npy", X)
PY
seed=11
for p in alice bob carol; do
  $bin/dcalign client upload "${tls[@]}" --token-file "$work/tokens/$p.token" --collaboration "$id" \
    --private "$work/$p.npy" --secret-out "$work/$p.F.npy" --seed $((seed++)) >/dev/null
  echo "$p uploaded A_i = A F_i"
done

# 4. The job was queued by the last upload; wait for it, then each participant fetches its G_i.
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
done

# 5. The check: the participants share one subspace, so after the alignment their bases agree,
#    F_i G_i = F_j G_j up to the noise, where the secret bases F_i themselves are unrelated.
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
w, users = sys.argv[1], ("alice", "bob", "carol")
F = {p: np.load(f"{w}/{p}.F.npy") for p in users}
FG = {p: F[p] @ np.load(f"{w}/result-{p}/G.npy") for p in users}
rel = lambda M, N: np.linalg.norm(M - N) / np.linalg.norm(N)
after = max(rel(FG[p], FG["alice"]) for p in users[1:])
before = min(rel(F[p], F["alice"]) for p in users[1:])
print(f"||F_i G_i - F_1 G_1|| / ||F_1 G_1||: at most {after:.1e}; ||F_i - F_1|| / ||F_1||: at least {before:.2f}")
sys.exit(0 if after < 1e-2 < before else 1)
PY
echo "service demo: OK"
