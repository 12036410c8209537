#!/usr/bin/env bash
# Makes the TLS files of a distprice cluster with openssl:
#   make-certs.sh OUTPUT_DIR SCHEDULER_HOST
# OUTPUT_DIR/ca.pem, ca-key.pem        the cluster's own certificate authority (made once, kept if present)
# OUTPUT_DIR/scheduler.pem, -key.pem   for `dask scheduler`; CN and subjectAltName SCHEDULER_HOST (plus
#                                      localhost and 127.0.0.1, for SSH tunnels and tests)
# OUTPUT_DIR/worker.pem, -key.pem      for every `dask worker` / `dask cuda worker`
# OUTPUT_DIR/client.pem, -key.pem      for distprice (configs/tls.yaml, configs/tls-local.yaml)
# Every certificate is signed by the CA and valid for TLS servers and clients alike: Dask processes both
# accept and open connections, and each side accepts only a peer whose certificate this CA signed.
# Keys are EC P-256, mode 600; certificates are valid for DAYS days (default 825).
set -euo pipefail

if [ "$#" -ne 2 ]; then
    echo "usage: $0 OUTPUT_DIR SCHEDULER_HOST" >&2
    exit 2
fi
out=$1
host=$2
days=${DAYS:-825}
umask 077
mkdir -p "$out"

if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then
    host_san="IP:$host"
else
    host_san="DNS:$host"
fi
scheduler_san=$host_san
for local in DNS:localhost IP:127.0.0.1; do
    [ "$local" = "$host_san" ] || scheduler_san="$scheduler_san,$local"
done

if [ ! -f "$out/ca.pem" ] || [ ! -f "$out/ca-key.pem" ]; then
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days "$((days * 2))" \
        -subj "/CN=distprice cluster CA" -keyout "$out/ca-key.pem" -out "$out/ca.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi

# issue NAME CN SAN: a key and a certificate signed by the CA
issue() {
    local name=$1 cn=$2 san=$3
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -subj "/CN=$cn" \
        -keyout "$out/$name-key.pem" -out "$out/$name.csr"
    openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" -CAcreateserial \
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

chmod 600 "$out"/*-key.pem
chmod 644 "$out/ca.pem" "$out/scheduler.pem" "$out/worker.pem" "$out/client.pem"
echo "wrote the CA, scheduler ($host), worker and client certificates and keys to $out"
