#!/bin/sh
# Start SeaweedFS's S3 store (`weed server -s3`) for Quartermaster, with one identity whose
# keys are received or made here, and write the role map the services read (roles.json).
#
# The keys: S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY when set (both; 16+ characters of
# [A-Za-z0-9]); otherwise those kept in $S3_CONFIG_DIR/credentials, made (random, 160 and
# 320 bits) on the first start. Every start writes, from the keys and the settings below:
#   $S3_CONFIG_DIR/s3.json     weed's identity file (one identity, every action)
#   $S3_CONFIG_DIR/roles.json  Quartermaster's role map: S3_ROLE_ARN -> this store
#                              (QM_ADMISSION_ROLES_FILE, QM_NODE_ROLES_FILE)
# all readable by this image's user only (uid 10001, the services' uid too).
#
#   S3_HOST (127.0.0.1)   the address weed advertises; S3_BIND (S3_HOST) the one it listens on
#   S3_PORT (8333)        the S3 API; S3_MASTER_PORT (9333), S3_VOLUME_PORT (8080) and
#                         S3_FILER_PORT (8888) are weed's own; each of the four also takes
#                         its port + 10000 for gRPC (weed's rule)
#   S3_ENDPOINT_URL (http://S3_HOST:S3_PORT)  the endpoint the role map gives clients
#   S3_ROLE_ARN (arn:aws:iam::000000000000:role/quartermaster)  S3_REGION (us-east-1)
#   S3_CONFIG_DIR (/etc/quartermaster/s3)  S3_DATA_DIR (/data)
# Further arguments go to `weed server`.
set -eu

: "${S3_HOST:=127.0.0.1}"
: "${S3_BIND:=$S3_HOST}"
: "${S3_PORT:=8333}"
: "${S3_MASTER_PORT:=9333}"
: "${S3_VOLUME_PORT:=8080}"
: "${S3_FILER_PORT:=8888}"
: "${S3_ENDPOINT_URL:=http://$S3_HOST:$S3_PORT}"
: "${S3_ROLE_ARN:=arn:aws:iam::000000000000:role/quartermaster}"
: "${S3_REGION:=us-east-1}"
: "${S3_CONFIG_DIR:=/etc/quartermaster/s3}"
: "${S3_DATA_DIR:=/data}"
umask 077

say() { echo "qm-seaweedfs: $*" >&2; }
random_hex() { head -c "$1" /dev/urandom | od -An -v -tx1 | tr -d ' \n'; }
# Keys and the other values go into JSON unquoted: refuse what would need escaping.
plain() { case "$2" in *[!A-Za-z0-9._:/@+=,-]* | "") say "$1 must be [A-Za-z0-9._:/@+=,-]+"; exit 2 ;; esac; }

credentials="$S3_CONFIG_DIR/credentials"
if [ -n "${S3_ACCESS_KEY_ID:-}${S3_SECRET_ACCESS_KEY:-}" ]; then
    access_key="${S3_ACCESS_KEY_ID:-}" secret_key="${S3_SECRET_ACCESS_KEY:-}"
    [ ${#access_key} -ge 16 ] && [ ${#secret_key} -ge 16 ] \
        || { say "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY: both, 16 characters or more"; exit 2; }
    source=received
elif [ -s "$credentials" ]; then
    access_key="$(sed -n 's/^access_key_id=//p' "$credentials")"
    secret_key="$(sed -n 's/^secret_access_key=//p' "$credentials")"
    source="kept in $credentials"
else
    access_key="QM$(random_hex 10 | tr a-f A-F)" secret_key="$(random_hex 40)"
    source="made on the first start"
fi
for pair in "S3_ACCESS_KEY_ID=$access_key" "S3_SECRET_ACCESS_KEY=$secret_key" \
    "S3_ENDPOINT_URL=$S3_ENDPOINT_URL" "S3_ROLE_ARN=$S3_ROLE_ARN" "S3_REGION=$S3_REGION"; do
    plain "${pair%%=*}" "${pair#*=}"
done

# Each file is written whole under a temporary name, then renamed: a reader never sees half.
write() { cat >"$1.tmp" && mv -f "$1.tmp" "$1"; }
printf 'access_key_id=%s\nsecret_access_key=%s\n' "$access_key" "$secret_key" | write "$credentials"
write "$S3_CONFIG_DIR/s3.json" <<JSON
{"identities": [{"name": "quartermaster",
  "credentials": [{"accessKey": "$access_key", "secretKey": "$secret_key"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
write "$S3_CONFIG_DIR/roles.json" <<JSON
{"default_role": "$S3_ROLE_ARN",
 "roles": {"$S3_ROLE_ARN": {"endpoint_url": "$S3_ENDPOINT_URL", "access_key_id": "$access_key",
                            "secret_access_key": "$secret_key", "region": "$S3_REGION"}}}
JSON
say "S3 at $S3_ENDPOINT_URL, keys $source, role map $S3_CONFIG_DIR/roles.json ($S3_ROLE_ARN)"

# No telemetry, no Iceberg or Lance catalog ports (they would collide between stacks), and a
# 1 s volume-server stop (its default 10 s lets other volume servers take over: there are none).
exec weed server -dir="$S3_DATA_DIR" -ip="$S3_HOST" -ip.bind="$S3_BIND" \
    -master.port="$S3_MASTER_PORT" -volume.port="$S3_VOLUME_PORT" -filer.port="$S3_FILER_PORT" \
    -s3 -s3.port="$S3_PORT" -s3.config="$S3_CONFIG_DIR/s3.json" \
    -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false -volume.max=0 \
    -volume.preStopSeconds=1 "$@"
