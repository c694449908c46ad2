# SPDX-License-Identifier: Apache-2.0
# Sourced by the server scripts in tests/ that start a server with TLS:
#   make_test_certs DIR   throwaway certificates (P-256 keys: quick to make),
#                         valid two days, in DIR:
#     ca.crt ca.key              the test CA
#     other-ca.crt other-ca.key  a CA the server does not trust
#     server.crt server.key      the server's, for localhost and 127.0.0.1
#     client.crt client.key      a client's, signed by the test CA
#     stranger.crt stranger.key  a client's signed by the other CA
#   The clients' certificates have no common name (O=coord test client):
#   etcd's JSON gateway refuses a client certificate with one (etcd 3.4.10
#   on: a CN names an etcd user, which the gateway cannot pass on).
#   Keys are mode 600, certificates 644. Installs openssl when missing.
make_test_certs() {
  command -v openssl >/dev/null || apt_install openssl
  local t="$1"
  mkdir -p "$t"
  local key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${key[@]}" -days 2 -subj "/CN=coord test CA" -keyout "$t/ca.key" -out "$t/ca.crt" 2>/dev/null
  openssl req -x509 "${key[@]}" -days 2 -subj "/CN=another CA" -keyout "$t/other-ca.key" -out "$t/other-ca.crt" 2>/dev/null
  # sign NAME SUBJECT CA EXTENSIONS
  sign() {
    openssl req "${key[@]}" -subj "$2" -keyout "$t/$1.key" -out "$t/$1.csr" 2>/dev/null
    printf '%s\n' "$4" > "$t/$1.ext"
    openssl x509 -req -in "$t/$1.csr" -CA "$t/$3.crt" -CAkey "$t/$3.key" -CAcreateserial -days 2 \
      -extfile "$t/$1.ext" -out "$t/$1.crt" 2>/dev/null
    rm -f "$t/$1.csr" "$t/$1.ext"
  }
  sign server "/CN=localhost" ca "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
  sign client "/O=coord test client" ca "extendedKeyUsage=clientAuth"
  sign stranger "/O=coord test client" other-ca "extendedKeyUsage=clientAuth"
  chmod 600 "$t"/*.key
  chmod 644 "$t"/*.crt
}
