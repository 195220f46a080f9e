#!/usr/bin/env bash
# A development certificate for dcalign-server on this machine: a self-signed certificate for
# localhost and 127.0.0.1 (valid 30 days) and its private key (mode 0600).
#
#   scripts/dev-cert.sh DIR
#
# writes DIR/server.crt and DIR/server.key; the server takes them with --tls-cert/--tls-key and
# clients trust DIR/server.crt with --ca-cert. For a real deployment use a certificate from your
# organisation's CA instead.
set -euo pipefail
if (($# != 1)); then
  echo "usage: scripts/dev-cert.sh DIR" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "dev-cert.sh: openssl is not installed" >&2; exit 1; }
dir=$1
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "basicConstraints=critical,CA:TRUE" \
  -keyout "$dir/server.key" -out "$dir/server.crt" 2>/dev/null
chmod 0600 "$dir/server.key"
echo "wrote $dir/server.crt and $dir/server.key"
