#!/usr/bin/env bash
# Makes the TLS files of a distprice cluster with openssl:
#   make-certs.sh OUTPUT_DIR SCHEDULER_HOST
# CA_DIR/ca-key.pem                    the key of the cluster's own certificate authority, kept apart from
#                                      what is handed out (CA_DIR defaults to OUTPUT_DIR.ca, mode 700); keep it
#                                      offline: whoever holds it can make certificates the cluster accepts
# OUTPUT_DIR/ca.pem                    the CA's certificate (the CA is made once, kept if present)
# OUTPUT_DIR/scheduler.pem, -key.pem   for `dask scheduler`; CN and subjectAltName SCHEDULER_HOST (plus
#                                      localhost and 127.0.0.1, for SSH tunnels and tests)
# OUTPUT_DIR/worker.pem, -key.pem      for every `dask worker`
# OUTPUT_DIR/client.pem, -key.pem      for distprice (configs/tls.yaml, configs/tls-local.yaml)
# Every certificate is signed by the CA and valid for TLS servers and clients alike: Dask processes both
# accept and open connections, and each side accepts only a peer whose certificate this CA signed.
# Keys are EC P-256, mode 600; certificates are valid for DAYS days (default 825).
set -euo pipefail

if [ "$#" -ne 2 ]; then
    echo "usage: [CA_DIR=folder] $0 OUTPUT_DIR SCHEDULER_HOST" >&2
    exit 2
fi
out=${1%/}
host=$2
ca_dir=${CA_DIR:-$out.ca}
days=${DAYS:-825}
umask 077
mkdir -p "$out" "$ca_dir"
chmod 700 "$ca_dir"
if [ "$(cd "$ca_dir" && pwd -P)" = "$(cd "$out" && pwd -P)" ]; then
    echo "CA_DIR must not be OUTPUT_DIR: the CA key stays apart from the certificates handed out" >&2
    exit 2
fi

if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then
    host_san="IP:$host"
else
    host_san="DNS:$host"
fi
scheduler_san=$host_san
for local in DNS:localhost IP:127.0.0.1; do
    [ "$local" = "$host_san" ] || scheduler_san="$scheduler_san,$local"
done

if [ ! -f "$out/ca.pem" ] || [ ! -f "$ca_dir/ca-key.pem" ]; then
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days "$((days * 2))" \
        -subj "/CN=distprice cluster CA" -keyout "$ca_dir/ca-key.pem" -out "$out/ca.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi

# issue NAME CN SAN: a key and a certificate signed by the CA
issue() {
    local name=$1 cn=$2 san=$3
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -subj "/CN=$cn" \
        -keyout "$out/$name-key.pem" -out "$out/$name.csr"
    openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$ca_dir/ca-key.pem" \
        -CAserial "$ca_dir/ca.srl" -CAcreateserial \
        -sha256 -days "$days" -out "$out/$name.pem" -extfile <(printf '%s\n' \
            "basicConstraints=critical,CA:FALSE" \
            "keyUsage=critical,digitalSignature,keyAgreement" \
            "extendedKeyUsage=serverAuth,clientAuth" \
            "subjectAltName=$san")
    rm -f "$out/$name.csr"
}

issue scheduler "$host" "$scheduler_san"
issue worker "distprice-worker" "DNS:distprice-worker"
issue client "distprice-client" "DNS:distprice-client"

chmod 600 "$out"/*-key.pem "$ca_dir/ca-key.pem"
chmod 644 "$out/ca.pem" "$out/scheduler.pem" "$out/worker.pem" "$out/client.pem"
echo "wrote the CA certificate, scheduler ($host), worker and client certificates and keys to $out; the CA key is in $ca_dir"
