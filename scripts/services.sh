#!/usr/bin/env bash
# scripts/services.sh makes sure the PostgreSQL, RabbitMQ, SQS emulator and
# Redis that expiryctl's tests, demo and benchmark expect are running on this
# machine (Debian 12):
#
#   PostgreSQL  127.0.0.1:5432, superuser role "root", database "expiryctl"
#               (the default URL postgres://root@127.0.0.1:5432/expiryctl?sslmode=disable),
#               user "postgres" reachable over TCP for the test harness
#   RabbitMQ    127.0.0.1:5672, guest/guest may log in to vhost "/",
#               plugin rabbitmq_shovel enabled (used by the benchmark),
#               plugin rabbitmq_management answering guest/guest on
#               http://127.0.0.1:15672/ (expiryctl reads the live queues there)
#   SQS         goaws v0.5.4 (github.com/Admiral-Piett/goaws, an SQS emulator) on
#               http://127.0.0.1:4100, region us-east-1, account 100010001000;
#               any credentials are accepted. Built from the module's source
#               into .cache/goaws/ (git-ignored), with its config and log
#               beside it, mended where it answers SendMessageBatch unlike SQS
#               (see goaws_mend).
#               goaws listens on 0.0.0.0 whatever its config says: acceptable
#               on a development or CI machine, never on a shared one.
#   Redis       127.0.0.1:6379 (and ::1), no password, nothing persisted
#
# It installs, creates, starts or repairs only what is missing, so it is safe to
# run again and again. When everything already runs (the common case) it needs no
# root and finishes in well under a second: every service is checked by talking
# to it over TCP, not through slow CLIs such as rabbitmqctl. A server already
# answering on a service's port is left alone, whoever started it. It prints one
# line per step to stderr and exits non-zero with the reason and the log to read
# when a service cannot be brought up. Installing packages needs root and
# network; building goaws needs Go and the Go module proxy (or its module cache).
#
# Environment (all optional):
#   PG_WAIT_SECONDS      how long to wait for PostgreSQL to accept connections (60)
#   RABBIT_WAIT_SECONDS  how long to wait for RabbitMQ to accept AMQP logins (90)
#   MGMT_WAIT_SECONDS    how long to wait for its management API to answer (60)
#   SQS_WAIT_SECONDS     how long to wait for goaws to answer /health (30)
#   REDIS_WAIT_SECONDS   how long to wait for Redis to answer PING (30)
set -euo pipefail

export PATH="/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}"
export LC_ALL=C

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly PG_HOST=127.0.0.1
readonly PG_PORT=5432
readonly PG_DB=expiryctl
readonly PG_OWNER=expiryctl_owner
readonly PG_DB_GOVERNED=expiryctl_demo
# The demo's River incident lives in a database of its own, as River's jobs
# do beside an expiryctl archive; the owner, who has no CREATEDB, owns it.
readonly PG_DB_RIVER=expiryctl_demo_river
# The demo's jobs-table incident lives in a database of its own too, a
# team's beside the archive, owned by the owner; expiryctl reaches its table
# as PG_JOBS_LOGIN, a plain login the owner grants only what the table's
# mapping names (the owner has no CREATEROLE to make it).
readonly PG_DB_JOBS=expiryctl_demo_jobs
readonly PG_JOBS_LOGIN=expiryctl_demo_jobs_rw
# The demo's deployment name: this cluster also serves database $PG_DB and
# every test's, so the demo's groups are its own (expiryctl_demo_operator, …).
readonly PG_DEPLOYMENT=demo
readonly PG_ROLE=root
readonly AMQP_HOST=127.0.0.1
readonly AMQP_PORT=5672
readonly MGMT_HOST=127.0.0.1
readonly MGMT_PORT=15672
readonly PG_WAIT_SECONDS="${PG_WAIT_SECONDS:-60}"
readonly RABBIT_WAIT_SECONDS="${RABBIT_WAIT_SECONDS:-90}"
readonly MGMT_WAIT_SECONDS="${MGMT_WAIT_SECONDS:-60}"
readonly SQS_HOST=127.0.0.1
readonly SQS_PORT=4100
readonly SQS_WAIT_SECONDS="${SQS_WAIT_SECONDS:-30}"
# goaws v0.4.x speaks only SQS's old Query protocol (form-encoded, XML
# answers) and does not work with the current AWS SDK, which speaks SQS's JSON
# protocol; goaws understands that from v0.5 on. v0.5.4 is served by the Go module proxy although its version list
# does not name it, so it is asked for by its exact version.
readonly GOAWS_MODULE=github.com/Admiral-Piett/goaws
readonly GOAWS_VERSION=v0.5.4
# GOAWS_BUILD names the build: the version and the mends goaws_mend makes.
# A change to the mends changes it, which rebuilds goaws and restarts one
# this script started from an older build.
readonly GOAWS_BUILD="$GOAWS_VERSION+batch-answers.1"
readonly GOAWS_DIR="$ROOT/.cache/goaws"
readonly REDIS_HOST=127.0.0.1
readonly REDIS_PORT=6379
readonly REDIS_WAIT_SECONDS="${REDIS_WAIT_SECONDS:-30}"
readonly REDIS_LOG=/var/log/redis/ci.log
readonly HBA_MARKER="# expiryctl scripts/services.sh: trust loopback TCP"

step() { printf 'services: %s\n' "$*" >&2; }
die() {
	printf 'services: error: %s\n' "$*" >&2
	exit 1
}
need_root() {
	[[ $(id -u) -eq 0 ]] || die "$1 needs root: run 'sudo scripts/services.sh'"
}

apt_updated=0
apt_install() {
	need_root "installing $*"
	if [[ $apt_updated -eq 0 ]]; then
		step "apt-get update"
		apt-get update -qq >&2 || die "apt-get update failed (no network or no apt sources?)"
		apt_updated=1
	fi
	step "installing $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2 </dev/null ||
		die "apt-get install $* failed"
}

# ---------------------------------------------------------------- PostgreSQL

# psql_admin runs SQL as the postgres superuser over TCP: the same way the test
# harness (internal/fixture/pgtest) connects. -w: never prompt for a password (CI has no
# stdin; a prompt would hang).
psql_admin() {
	PGCONNECT_TIMEOUT=5 psql -X -w -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" \
		-U postgres -d postgres -At "$@" </dev/null
}

pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2 >/dev/null 2>&1; }

pg_server_installed() {
	command -v pg_ctlcluster >/dev/null 2>&1 && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

# pg_version prints the major version whose cluster "main" we manage: the
# newest one under /etc/postgresql, or else the newest server installed.
pg_version() {
	local v
	v=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
	if [[ -z $v ]]; then
		v=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
	fi
	[[ -n $v ]] || die "no PostgreSQL version found under /etc/postgresql or /usr/lib/postgresql"
	printf '%s\n' "$v"
}

pg_log_hint() { printf 'see /var/log/postgresql/postgresql-%s-main.log' "$1"; }

ensure_postgres_running() {
	if pg_ready; then
		step "postgresql: accepting connections on $PG_HOST:$PG_PORT"
		return
	fi
	if ! pg_server_installed; then
		apt_install postgresql
	fi
	need_root "starting PostgreSQL"
	local ver
	ver=$(pg_version)
	if ! pg_lsclusters -h 2>/dev/null | awk -v v="$ver" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
		step "postgresql: creating cluster $ver/main"
		pg_createcluster "$ver" main >&2 || die "pg_createcluster $ver main failed"
	fi
	# status exits 0 when the cluster runs: then it is still starting up (or
	# recovering) and we only wait.
	if pg_ctlcluster "$ver" main status >/dev/null 2>&1; then
		step "postgresql: cluster $ver/main is running but not ready yet; waiting"
	else
		step "postgresql: starting cluster $ver/main"
		pg_ctlcluster --skip-systemctl-redirect "$ver" main start >&2 ||
			die "pg_ctlcluster $ver main start failed: $(pg_log_hint "$ver")"
	fi
	local deadline=$((SECONDS + PG_WAIT_SECONDS))
	until pg_ready; do
		if ((SECONDS >= deadline)); then
			die "postgresql did not accept connections on $PG_HOST:$PG_PORT within ${PG_WAIT_SECONDS}s ($(pg_log_hint "$ver"); is the cluster on another port? see pg_lsclusters)"
		fi
		sleep 1
	done
	step "postgresql: accepting connections on $PG_HOST:$PG_PORT"
}

# ensure_postgres_tcp_login makes sure user postgres can log in over loopback TCP
# without a password, which the test harness and the default URL rely on.
#
# Debian's stock pg_hba.conf asks for a password (scram-sha-256) on host lines and
# the postgres role has none, so a freshly installed server refuses the tests. We
# do not touch pg_hba.conf when the login already works: the machine may be set up
# differently on purpose. When it fails, we add "trust" for 127.0.0.1/32 and ::1/128
# at the top (the first matching line wins) and reload. Trust is acceptable here
# only because this script is for development and CI machines and the lines cover
# loopback only; never run it against a shared server.
ensure_postgres_tcp_login() {
	local err
	if err=$(psql_admin -c 'select 1' 2>&1 >/dev/null); then
		step "postgresql: user postgres can log in over TCP"
		return
	fi
	need_root "fixing PostgreSQL authentication (psql -h $PG_HOST -U postgres failed: $err)"
	local ver hba
	ver=$(pg_version)
	hba="/etc/postgresql/$ver/main/pg_hba.conf"
	[[ -f $hba ]] || die "psql -h $PG_HOST -U postgres failed ($err) and $hba does not exist"
	if grep -qF "$HBA_MARKER" "$hba"; then
		die "psql -h $PG_HOST -U postgres fails although $hba already trusts loopback: $err"
	fi
	step "postgresql: psql -h $PG_HOST -U postgres failed ($err); adding loopback trust lines to $hba"
	local tmp
	tmp=$(mktemp "$hba.XXXXXX")
	{
		printf '%s (development/CI machine only)\n' "$HBA_MARKER"
		printf 'host    all    all    127.0.0.1/32    trust\n'
		printf 'host    all    all    ::1/128         trust\n'
		cat "$hba"
	} >"$tmp"
	chown --reference="$hba" "$tmp"
	chmod --reference="$hba" "$tmp"
	mv "$tmp" "$hba"
	pg_ctlcluster "$ver" main reload >&2 || die "pg_ctlcluster $ver main reload failed"
	err=$(psql_admin -c 'select 1' 2>&1 >/dev/null) ||
		die "psql -h $PG_HOST -U postgres still fails after trusting loopback: $err"
	step "postgresql: user postgres can log in over TCP"
}

ensure_postgres_role_and_db() {
	local state
	# One round trip: "<role exists>|<superuser>|<login>|<db exists>|<db owner>".
	state=$(psql_admin -c "
		select coalesce((select 't|' || rolsuper::text || '|' || rolcanlogin::text
		                   from pg_roles where rolname = '$PG_ROLE'), 'f|f|f')
		    || '|' || coalesce((select 't|' || pg_get_userbyid(datdba)
		                          from pg_database where datname = '$PG_DB'), 'f|')") ||
		die "could not query roles and databases as postgres"
	local role_exists role_super role_login db_exists db_owner
	IFS='|' read -r role_exists role_super role_login db_exists db_owner <<<"$state"

	if [[ $role_exists != t ]]; then
		step "postgresql: creating role $PG_ROLE (superuser, login)"
		# Several runs may race; a role that appeared meanwhile is fine.
		psql_admin -c "create role $PG_ROLE superuser login" >/dev/null 2>&1 ||
			psql_admin -c "select 1 from pg_roles where rolname = '$PG_ROLE'" | grep -q 1 ||
			die "could not create role $PG_ROLE"
	elif [[ $role_super != true || $role_login != true ]]; then
		step "postgresql: granting role $PG_ROLE superuser and login"
		psql_admin -c "alter role $PG_ROLE superuser login" >/dev/null
	else
		step "postgresql: role $PG_ROLE exists"
	fi

	if [[ $db_exists != t ]]; then
		step "postgresql: creating database $PG_DB owned by $PG_ROLE"
		psql_admin -c "create database $PG_DB owner $PG_ROLE" >/dev/null 2>&1 ||
			psql_admin -c "select 1 from pg_database where datname = '$PG_DB'" | grep -q 1 ||
			die "could not create database $PG_DB"
	elif [[ $db_owner != "$PG_ROLE" ]]; then
		step "postgresql: database $PG_DB exists (owned by $db_owner, not $PG_ROLE; left as is)"
	else
		step "postgresql: database $PG_DB exists"
	fi
}

# ensure_governed_people creates what a governed deployment has, as
# docs/governance.md sets one up: the schema's owner, a login that is
# neither a superuser nor CREATEROLE, owning databases $PG_DB_GOVERNED and
# $PG_DB_RIVER (where `expiryctl demo --river` runs River) and $PG_DB_JOBS
# (where `expiryctl demo --job-table` keeps a team's jobs table), with
# ADMIN OPTION on the groups of deployment $PG_DEPLOYMENT from `expiryctl
# access bootstrap --deployment` (run here as the DBA); and the demo's people as plain logins: alice (requests
# and runs), bob and carol (approve), audrey (audits), dana and erin
# (admins, who propose and approve a jobs table's mapping), and
# $PG_JOBS_LOGIN, the jobs table's capture and replay login. `expiryctl migrate`
# and `expiryctl access grant`, run as the owner, give them their groups
# (see `make demo`).
ensure_governed_people() {
	local sql="
		do \$\$
		declare p text;
		begin
		  if not exists (select 1 from pg_roles where rolname = '$PG_OWNER') then
		    create role $PG_OWNER login nocreaterole nosuperuser;
		  else
		    alter role $PG_OWNER nocreaterole;
		  end if;
		  foreach p in array array['alice', 'bob', 'carol', 'audrey', 'dana', 'erin', '$PG_JOBS_LOGIN'] loop
		    if not exists (select 1 from pg_roles where rolname = p) then
		      execute format('create role %I login nosuperuser nocreaterole nocreatedb', p);
		    end if;
		  end loop;
		end \$\$;"
	psql_admin -c "$sql" >/dev/null 2>&1 || psql_admin -c "$sql" >/dev/null ||
		die "could not create the owner role $PG_OWNER and the demo's logins"
	if ! psql_admin -c "select 1 from pg_database where datname = '$PG_DB_GOVERNED'" | grep -q 1; then
		step "postgresql: creating database $PG_DB_GOVERNED owned by $PG_OWNER (not a superuser)"
		psql_admin -c "create database $PG_DB_GOVERNED owner $PG_OWNER" >/dev/null 2>&1 ||
			psql_admin -c "select 1 from pg_database where datname = '$PG_DB_GOVERNED'" | grep -q 1 ||
			die "could not create database $PG_DB_GOVERNED"
	fi
	if ! psql_admin -c "select 1 from pg_database where datname = '$PG_DB_RIVER'" | grep -q 1; then
		step "postgresql: creating database $PG_DB_RIVER owned by $PG_OWNER (the demo's River jobs)"
		psql_admin -c "create database $PG_DB_RIVER owner $PG_OWNER" >/dev/null 2>&1 ||
			psql_admin -c "select 1 from pg_database where datname = '$PG_DB_RIVER'" | grep -q 1 ||
			die "could not create database $PG_DB_RIVER"
	fi
	if ! psql_admin -c "select 1 from pg_database where datname = '$PG_DB_JOBS'" | grep -q 1; then
		step "postgresql: creating database $PG_DB_JOBS owned by $PG_OWNER (the demo's jobs table)"
		psql_admin -c "create database $PG_DB_JOBS owner $PG_OWNER" >/dev/null 2>&1 ||
			psql_admin -c "select 1 from pg_database where datname = '$PG_DB_JOBS'" | grep -q 1 ||
			die "could not create database $PG_DB_JOBS"
	fi
	local administered
	administered=$(psql_admin -c "select count(*) from pg_auth_members a join pg_roles g on g.oid = a.roleid
		join pg_roles m on m.oid = a.member where m.rolname = '$PG_OWNER' and a.admin_option
		and g.rolname in ('expiryctl_${PG_DEPLOYMENT}_ingester', 'expiryctl_${PG_DEPLOYMENT}_operator',
		                  'expiryctl_${PG_DEPLOYMENT}_approver', 'expiryctl_${PG_DEPLOYMENT}_auditor', 'expiryctl_${PG_DEPLOYMENT}_admin')")
	if [[ $administered != 5 ]]; then
		step "postgresql: bootstrapping deployment $PG_DEPLOYMENT's groups for $PG_OWNER (expiryctl access bootstrap, as the DBA)"
		(cd "$ROOT" && go run ./cmd/expiryctl access bootstrap "$PG_OWNER" --deployment "$PG_DEPLOYMENT" \
			--database-url "postgres://postgres@$PG_HOST:$PG_PORT/postgres?sslmode=disable") >/dev/null ||
			die "could not bootstrap deployment $PG_DEPLOYMENT's groups for $PG_OWNER"
	fi
	step "postgresql: owner $PG_OWNER (no CREATEROLE, administers expiryctl_${PG_DEPLOYMENT}_*, owns $PG_DB_GOVERNED, $PG_DB_RIVER and $PG_DB_JOBS) and logins alice, bob, carol, audrey, dana, erin, $PG_JOBS_LOGIN exist"
}

# ------------------------------------------------------------------ RabbitMQ

# amqp_probe opens an AMQP 0-9-1 connection as guest/guest to vhost "/" and
# closes it again, speaking just enough of the protocol with bash's /dev/tcp.
# That is the exact thing the tests need, and it takes milliseconds where every
# rabbitmqctl call boots an Erlang VM (1-3 s). It prints one word:
#   ok        logged in and opened vhost "/"
#   down      nothing answers AMQP on the port (not started, or still booting)
#   refused   the broker refused guest/guest
#   no-vhost  logged in, but guest may not open vhost "/" (or it does not exist)
amqp_probe() {
	local fd
	if ! exec {fd}<>"/dev/tcp/$AMQP_HOST/$AMQP_PORT"; then
		echo down
		return
	fi 2>/dev/null
	# hex_out writes hex digits as raw bytes (the format string is built from
	# \xHH escapes only); read_method reads one frame and prints
	# "<class>.<method> <first 8 argument bytes>", or nothing at end of stream.
	# shellcheck disable=SC2059
	hex_out() { printf "$(sed 's/../\\x&/g' <<<"$1")" >&"$fd"; }
	frame_out() { hex_out "010000$(printf '%08x' $((${#1} / 2)))${1}ce"; }
	read_method() {
		local -a h p
		h=($(timeout 5 head -c 7 <&"$fd" 2>/dev/null | od -An -tu1 -v)) || true
		[[ ${#h[@]} -eq 7 && ${h[0]} -eq 1 ]] || return 0
		local size=$(((h[3] << 24) | (h[4] << 16) | (h[5] << 8) | h[6]))
		p=($(timeout 5 head -c $((size + 1)) <&"$fd" 2>/dev/null | od -An -tu1 -v)) || true
		[[ ${#p[@]} -eq $((size + 1)) ]] || return 0
		echo "$(((p[0] << 8) | p[1])).$(((p[2] << 8) | p[3])) ${p[*]:4:8}"
	}
	local m result=down
	printf 'AMQP\x00\x00\x09\x01' >&"$fd"
	m=$(read_method)
	if [[ $m == 10.10* ]]; then # connection.start
		# connection.start-ok: empty client properties, PLAIN "\0guest\0guest", en_US.
		frame_out "000a000b00000000"05504c41494e"0000000c00677565737400677565737405656e5f5553"
		m=$(read_method)
		result=refused # RabbitMQ just closes the socket on a failed login
		if [[ $m == 10.30* ]]; then # connection.tune: echo its limits, no heartbeats
			local -a t=(${m#* })
			frame_out "000a001f$(printf '%02x%02x%02x%02x%02x%02x' "${t[@]:0:6}")0000"
			frame_out "000a0028012f0000" # connection.open vhost "/"
			m=$(read_method)
			result=no-vhost
			if [[ $m == 10.41* ]]; then # connection.open-ok
				result=ok
				frame_out "000a003200c80000000000" # connection.close 200
				read_method >/dev/null           # connection.close-ok
			fi
		fi
	fi
	exec {fd}>&-
	echo "$result"
}

rabbit_log_hint() { printf 'see /var/log/rabbitmq/ (startup_log, startup_err, rabbit@*.log)'; }

# wait_for_amqp waits until the probe gets past "down" and prints its result.
wait_for_amqp() {
	local deadline=$((SECONDS + RABBIT_WAIT_SECONDS)) r
	while r=$(amqp_probe) || true; [[ -z $r || $r == down ]]; do
		if ((SECONDS >= deadline)); then
			die "rabbitmq did not accept AMQP connections on $AMQP_HOST:$AMQP_PORT within ${RABBIT_WAIT_SECONDS}s ($(rabbit_log_hint))"
		fi
		sleep 1
	done
	printf '%s\n' "$r"
}

ensure_rabbitmq_running() {
	local probe
	probe=$(amqp_probe) || true
	if [[ -n $probe && $probe != down ]]; then
		step "rabbitmq: accepting AMQP connections on $AMQP_HOST:$AMQP_PORT"
		RABBIT_PROBE=$probe
		return
	fi
	if ! command -v rabbitmq-server >/dev/null 2>&1; then
		apt_install rabbitmq-server
	fi
	need_root "starting RabbitMQ"
	if rabbitmq-diagnostics -q ping >/dev/null 2>&1; then
		step "rabbitmq: node is up but not accepting AMQP yet; waiting"
	else
		step "rabbitmq: starting (rabbitmq-server -detached)"
		rabbitmq-server -detached >&2 </dev/null || die "rabbitmq-server -detached failed: $(rabbit_log_hint)"
	fi
	RABBIT_PROBE=$(wait_for_amqp)
	step "rabbitmq: accepting AMQP connections on $AMQP_HOST:$AMQP_PORT"
}

# ensure_guest_login repairs the default guest/guest account when the probe could
# not log in with it. guest is limited to loopback connections by RabbitMQ's
# default loopback_users setting, which is all the tests need.
ensure_guest_login() {
	case $RABBIT_PROBE in
	ok)
		step "rabbitmq: guest/guest can log in to vhost / from $AMQP_HOST"
		return
		;;
	refused | no-vhost) ;;
	*) die "rabbitmq: unexpected probe result '$RABBIT_PROBE'" ;;
	esac
	need_root "repairing the RabbitMQ guest account"
	step "rabbitmq: guest/guest cannot log in ($RABBIT_PROBE); repairing the guest account"
	if ! rabbitmqctl -q list_users 2>/dev/null | awk '{ print $1 }' | grep -qx guest; then
		rabbitmqctl add_user guest guest >&2
		rabbitmqctl set_user_tags guest administrator >&2
	elif ! rabbitmqctl -q authenticate_user guest guest >/dev/null 2>&1; then
		rabbitmqctl change_password guest guest >&2
	fi
	if ! rabbitmqctl -q list_vhosts 2>/dev/null | grep -qx /; then
		rabbitmqctl add_vhost / >&2
	fi
	rabbitmqctl set_permissions -p / guest '.*' '.*' '.*' >&2
	RABBIT_PROBE=$(amqp_probe) || true
	[[ $RABBIT_PROBE == ok ]] ||
		die "guest/guest still cannot log in to vhost / ($RABBIT_PROBE): check loopback_users in /etc/rabbitmq/rabbitmq.conf"
	step "rabbitmq: guest/guest can log in to vhost / from $AMQP_HOST"
}

# ensure_plugins enables, on the running node, the plugins expiryctl needs:
# rabbitmq_shovel (the benchmark) and rabbitmq_management (the live queues
# expiryctl reads over HTTP). The enabled-plugins file is read first because
# asking the node costs a few seconds; the missing plugins are then enabled in
# one rabbitmq-plugins call, which starts them on the running node. Enabling
# an enabled plugin is harmless, so a stale file only costs time.
PLUGINS_ENABLED_NOW=0
ensure_plugins() {
	local file="${RABBITMQ_ENABLED_PLUGINS_FILE:-/etc/rabbitmq/enabled_plugins}" p missing=()
	for p in rabbitmq_shovel rabbitmq_management; do
		if ! { [[ -r $file ]] && grep -Eq "(^|[^a-z_])$p([^a-z_]|\$)" "$file"; }; then
			missing+=("$p")
		fi
	done
	if [[ ${#missing[@]} -eq 0 ]]; then
		step "rabbitmq: plugins rabbitmq_shovel and rabbitmq_management enabled"
		return
	fi
	need_root "enabling the RabbitMQ plugins ${missing[*]}"
	step "rabbitmq: enabling plugins ${missing[*]}"
	rabbitmq-plugins -q enable "${missing[@]}" >&2 </dev/null ||
		die "rabbitmq-plugins enable ${missing[*]} failed: $(rabbit_log_hint)"
	PLUGINS_ENABLED_NOW=1
}

# management_probe asks the management API who guest/guest is, over bash's
# /dev/tcp (curl may not be installed on a fresh machine), and prints one word:
#   ok       the API answered 200
#   down     nothing listens on the port, or it did not answer (still starting)
#   refused  the API refused guest/guest (401)
#   other    something else answered: the status line follows
management_probe() {
	local fd status
	if ! exec {fd}<>"/dev/tcp/$MGMT_HOST/$MGMT_PORT"; then
		echo down
		return
	fi 2>/dev/null
	printf 'GET /api/whoami HTTP/1.0\r\nHost: %s:%s\r\nAuthorization: Basic %s\r\n\r\n' \
		"$MGMT_HOST" "$MGMT_PORT" "$(printf 'guest:guest' | base64)" >&"$fd" 2>/dev/null || true
	status=$(timeout 5 head -n 1 <&"$fd" 2>/dev/null | tr -d '\r') || true
	exec {fd}>&-
	case $status in
	"HTTP/1."?" 200"*) echo ok ;;
	"HTTP/1."?" 401"*) echo refused ;;
	"") echo down ;;
	*) echo "other $status" ;;
	esac
}

# ensure_management_api waits until the management API answers guest/guest on
# $MGMT_HOST:$MGMT_PORT. A plugin just enabled, or a node just started, opens
# the HTTP listener a moment after AMQP. When the enabled-plugins file named
# the plugin but nothing answers after a short grace, the node did not start
# it (the file was edited behind its back): enabling it again applies the file
# to the running node.
ensure_management_api() {
	local r deadline=$((SECONDS + MGMT_WAIT_SECONDS)) grace=$((SECONDS + 10))
	while r=$(management_probe) || true; [[ $r == down ]]; do
		if ((SECONDS >= deadline)); then
			die "the RabbitMQ management API did not answer on http://$MGMT_HOST:$MGMT_PORT/ within ${MGMT_WAIT_SECONDS}s (is another management.tcp.port configured? $(rabbit_log_hint))"
		fi
		if ((PLUGINS_ENABLED_NOW == 0 && SECONDS >= grace)); then
			need_root "starting the rabbitmq_management plugin"
			step "rabbitmq: nothing answers on $MGMT_HOST:$MGMT_PORT; enabling rabbitmq_management on the running node"
			rabbitmq-plugins -q enable rabbitmq_management >&2 </dev/null ||
				die "rabbitmq-plugins enable rabbitmq_management failed: $(rabbit_log_hint)"
			PLUGINS_ENABLED_NOW=1
		fi
		sleep 0.5
	done
	case $r in
	ok) step "rabbitmq: management API answers guest/guest on http://$MGMT_HOST:$MGMT_PORT/" ;;
	refused) die "the RabbitMQ management API refuses guest/guest: give guest the administrator tag (rabbitmqctl set_user_tags guest administrator)" ;;
	*) die "the RabbitMQ management API on http://$MGMT_HOST:$MGMT_PORT/ answered '${r#other }' to GET /api/whoami" ;;
	esac
}

# ----------------------------------------------------------------- SQS (goaws)

# sqs_probe asks for goaws's http://$SQS_HOST:$SQS_PORT/health over bash's
# /dev/tcp, like management_probe, and prints one word:
#   ok     it answered 200 "OK"
#   down   nothing listens on the port, or it did not answer (still starting)
#   other  something else answered: the status line follows
sqs_probe() {
	local fd reply
	if ! exec {fd}<>"/dev/tcp/$SQS_HOST/$SQS_PORT"; then
		echo down
		return
	fi 2>/dev/null
	# HTTP/1.0: the server closes the connection after its answer.
	printf 'GET /health HTTP/1.0\r\nHost: %s:%s\r\n\r\n' "$SQS_HOST" "$SQS_PORT" >&"$fd" 2>/dev/null || true
	reply=$(timeout 5 cat <&"$fd" 2>/dev/null | tr -d '\r') || true
	exec {fd}>&-
	case $reply in
	"HTTP/1."?" 200"*$'\n\n'OK) echo ok ;;
	"") echo down ;;
	*) echo "other ${reply%%$'\n'*}" ;;
	esac
}

# sqs_call sends one SQS JSON-protocol call ($1, the operation; $2, its JSON
# body) as the AWS SDK would, and prints the answer: its status line, its
# headers, a blank line and its body.
sqs_call() {
	local fd op=$1 body=$2 reply
	if ! exec {fd}<>"/dev/tcp/$SQS_HOST/$SQS_PORT"; then
		return
	fi 2>/dev/null
	# HTTP/1.0: the server closes the connection after its answer.
	printf 'POST / HTTP/1.0\r\nHost: %s:%s\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.%s\r\nContent-Length: %d\r\n\r\n%s' \
		"$SQS_HOST" "$SQS_PORT" "$op" "${#body}" "$body" >&"$fd" 2>/dev/null || true
	reply=$(timeout 5 cat <&"$fd" 2>/dev/null | tr -d '\r') || true
	exec {fd}>&-
	printf '%s\n' "$reply"
}

# sqs_body is the body of the answer sqs_call printed on stdin.
sqs_body() {
	local reply
	reply=$(cat)
	printf '%s\n' "${reply#*$'\n\n'}"
}

# sqs_json_probe sends the SQS JSON protocol's ListQueues, as the AWS SDK
# would, and prints the status line of the answer. An old goaws (v0.4.x)
# answers /health but refuses this with 400.
sqs_json_probe() {
	local reply
	reply=$(sqs_call ListQueues '{}')
	printf '%s\n' "${reply%%$'\n'*}"
}

# sqs_batch_probe says whether the SQS server answers SendMessageBatch as SQS
# does, naming its entries Successful (see goaws_mend): "ok" or what it
# answered.
sqs_batch_probe() {
	local q="expiryctl-services-probe-$$" url answer
	url=$(sqs_call CreateQueue "{\"QueueName\":\"$q\"}" | sqs_body | sed -n 's/.*"QueueUrl":"\([^"]*\)".*/\1/p')
	if [[ -z $url ]]; then
		echo "no queue made for the probe"
		return
	fi
	answer=$(sqs_call SendMessageBatch "{\"QueueUrl\":\"$url\",\"Entries\":[{\"Id\":\"0\",\"MessageBody\":\"probe\"}]}" | sqs_body)
	sqs_call DeleteQueue "{\"QueueUrl\":\"$url\"}" >/dev/null
	if [[ $answer == *'"Successful":[{'* ]]; then
		echo ok
	else
		printf '%s\n' "${answer:-nothing}"
	fi
}

# goaws_mend makes goaws's source at $1 answer SendMessageBatch as SQS
# does, which expiryctl's SQS publisher relies on: in the JSON protocol
# SQS names the answer's entries Successful and Failed, where goaws v0.5.4
# uses the Query protocol's names (so the AWS SDK finds no entry answered),
# and SQS delays an entry by its DelaySeconds, which goaws ignores. Each
# mend must find its text: a goaws that changed is refused, not built.
goaws_mend() {
	local src=$1
	mend() {
		local file="$src/$1" from=$2 to=$3
		grep -qF -- "$from" "$file" || die "goaws_mend: $1 no longer holds '$from': look at the mends again for $GOAWS_VERSION"
		FROM=$from TO=$to perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$file"
	}
	mend app/models/responses.go 'json:"SendMessageBatchResultEntry"' 'json:"Successful"'
	mend app/models/responses.go 'json:"BatchResultErrorEntry,omitempty"' 'json:"Failed"'
	mend app/gosqs/send_message_batch.go 'msg.MD5OfMessageBody = utils.GetMD5Hash(sendEntry.MessageBody)' \
		'msg.MD5OfMessageBody = utils.GetMD5Hash(sendEntry.MessageBody)
		msg.DelaySecs = models.SyncQueues.Queues[queueName].DelaySeconds
		if sendEntry.DelaySeconds != 0 {
			msg.DelaySecs = sendEntry.DelaySeconds
		}'
}

# ensure_goaws_installed builds goaws $GOAWS_BUILD into $GOAWS_DIR unless the
# stamp beside the binary says it is there already: the module's source is
# downloaded (or read from the module cache), copied, mended (goaws_mend)
# and built; the stamp is written last, so an interrupted install is redone.
ensure_goaws_installed() {
	local bin="$GOAWS_DIR/goaws" stamp="$GOAWS_DIR/version"
	if [[ -x $bin && -r $stamp && $(<"$stamp") == "$GOAWS_BUILD" ]]; then
		return
	fi
	command -v go >/dev/null 2>&1 ||
		die "building goaws needs Go on PATH (under sudo: sudo env PATH=\"\$PATH\" scripts/services.sh)"
	command -v perl >/dev/null 2>&1 || apt_install perl
	step "goaws: building $GOAWS_MODULE $GOAWS_BUILD into $GOAWS_DIR"
	mkdir -p "$GOAWS_DIR"
	rm -f "$stamp"
	local dir tmp
	dir=$(go mod download -json "$GOAWS_MODULE@$GOAWS_VERSION" </dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -n $dir && -d $dir ]] ||
		die "go mod download $GOAWS_MODULE@$GOAWS_VERSION failed (no network, and not in the Go module cache?)"
	tmp=$(mktemp -d "$GOAWS_DIR/build.XXXXXX")
	cp -R "$dir/." "$tmp/"
	chmod -R u+w "$tmp"
	goaws_mend "$tmp"
	if ! (cd "$tmp" && go build -o "$tmp/goaws.bin" ./app/cmd) >&2 </dev/null; then
		rm -rf "$tmp"
		die "building goaws $GOAWS_BUILD failed (its dependencies not in the Go module cache, and no network?)"
	fi
	mv -f "$tmp/goaws.bin" "$bin"
	rm -rf "$tmp"
	printf '%s\n' "$GOAWS_BUILD" >"$stamp"
}

# stop_stale_goaws stops a goaws this script started whose binary has been
# replaced since (its /proc exe reads "(deleted)"): it predates the build
# now in $GOAWS_DIR.
stop_stale_goaws() {
	local pid exe
	for pid in $(pgrep -f "^$GOAWS_DIR/goaws " || true); do
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
		if [[ $exe == *" (deleted)" ]]; then
			step "goaws: stopping pid $pid, started from an older build"
			kill "$pid" 2>/dev/null || true
			local deadline=$((SECONDS + 10))
			while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
		fi
	done
}

# write_goaws_config writes goaws's config beside it, rewriting it only when it
# differs. EnableDuplicates makes FIFO queues honour MessageDeduplicationId.
write_goaws_config() {
	local cfg="$GOAWS_DIR/goaws.yaml" want
	want="Local:
  Host: $SQS_HOST
  Port: $SQS_PORT
  Region: us-east-1
  AccountId: \"100010001000\"
  LogToFile: false
  EnableDuplicates: true
  QueueAttributeDefaults:
    VisibilityTimeout: 30
    ReceiveMessageWaitTimeSeconds: 0
    MaximumMessageSize: 262144
  Queues: []
  Topics: []"
	if [[ ! -r $cfg || $(<"$cfg") != "$want" ]]; then
		printf '%s\n' "$want" >"$cfg"
	fi
}

# ensure_sqs_running starts the goaws built here when nothing answers on
# $SQS_HOST:$SQS_PORT. One that answers is left alone, wherever it came from,
# as long as it speaks the JSON protocol the AWS SDK uses. goaws keeps its
# queues in memory only: a restart loses them, which tests do not mind.
ensure_sqs_running() {
	local probe
	ensure_goaws_installed
	stop_stale_goaws
	probe=$(sqs_probe) || true
	if [[ $probe == down ]]; then
		write_goaws_config
		local bin="$GOAWS_DIR/goaws" cfg="$GOAWS_DIR/goaws.yaml" log="$GOAWS_DIR/goaws.log" pid
		step "goaws: starting $bin on port $SQS_PORT (log: $log)"
		setsid nohup "$bin" -config "$cfg" -loglevel warn Local >"$log" 2>&1 </dev/null &
		pid=$!
		local deadline=$((SECONDS + SQS_WAIT_SECONDS))
		while probe=$(sqs_probe) || true; [[ $probe == down ]]; do
			if ! kill -0 "$pid" 2>/dev/null; then
				die "goaws exited at once: see $log"
			fi
			if ((SECONDS >= deadline)); then
				die "goaws did not answer on http://$SQS_HOST:$SQS_PORT/health within ${SQS_WAIT_SECONDS}s: see $log"
			fi
			sleep 0.2
		done
	fi
	if [[ $probe != ok ]]; then
		die "something else listens on $SQS_HOST:$SQS_PORT: it answered '${probe#other }' to GET /health; stop it so that goaws can start there"
	fi
	local status
	status=$(sqs_json_probe)
	if [[ $status != "HTTP/1."?" 200"* ]]; then
		die "the server on $SQS_HOST:$SQS_PORT answers /health but not SQS's JSON protocol (answered '${status:-nothing}'; a goaws older than v0.5?): stop it, and run this script again"
	fi
	local batch
	batch=$(sqs_batch_probe)
	if [[ $batch != ok ]]; then
		die "the server on $SQS_HOST:$SQS_PORT does not answer SendMessageBatch as SQS does (answered '$batch'; a goaws not built by this script, without its mends?): stop it, and run this script again"
	fi
	step "sqs: goaws answers on http://$SQS_HOST:$SQS_PORT/"
}

# --------------------------------------------------------------------- Redis

# redis_probe sends PING over bash's /dev/tcp and prints one word:
#   ok     it answered +PONG
#   down   nothing listens on the port, it did not answer, or it is still
#          loading its data set (-LOADING)
#   other  something else answered (-NOAUTH: a password is set): the reply follows
redis_probe() {
	local fd reply
	if ! exec {fd}<>"/dev/tcp/$REDIS_HOST/$REDIS_PORT"; then
		echo down
		return
	fi 2>/dev/null
	printf 'PING\r\n' >&"$fd" 2>/dev/null || true
	reply=$(timeout 5 head -n 1 <&"$fd" 2>/dev/null | tr -d '\r') || true
	exec {fd}>&-
	case $reply in
	+PONG) echo ok ;;
	"" | -LOADING*) echo down ;;
	*) echo "other $reply" ;;
	esac
}

# ensure_redis_running starts a Redis for the tests when none answers PING on
# $REDIS_HOST:$REDIS_PORT: loopback only, no snapshots and no append-only
# file, since test data need not outlive the server. Debian's package also
# ships a systemd unit; it is not used, because CI machines run no systemd.
ensure_redis_running() {
	local probe
	probe=$(redis_probe) || true
	if [[ $probe == down ]]; then
		if ! command -v redis-server >/dev/null 2>&1; then
			apt_install redis-server
		fi
		need_root "starting Redis"
		mkdir -p /var/lib/redis /var/log/redis
		step "redis: starting redis-server on $REDIS_HOST:$REDIS_PORT (log: $REDIS_LOG)"
		redis-server --daemonize yes --bind "$REDIS_HOST" -::1 --port "$REDIS_PORT" --save "" --appendonly no \
			--dir /var/lib/redis --logfile "$REDIS_LOG" >&2 </dev/null ||
			die "redis-server failed to start: see $REDIS_LOG"
		local deadline=$((SECONDS + REDIS_WAIT_SECONDS))
		while probe=$(redis_probe) || true; [[ $probe == down ]]; do
			if ((SECONDS >= deadline)); then
				die "redis did not answer PING on $REDIS_HOST:$REDIS_PORT within ${REDIS_WAIT_SECONDS}s: see $REDIS_LOG"
			fi
			sleep 0.2
		done
	fi
	if [[ $probe != ok ]]; then
		die "the server on $REDIS_HOST:$REDIS_PORT answered '${probe#other }' to PING (the tests expect a Redis without a password)"
	fi
	step "redis: answers PING on $REDIS_HOST:$REDIS_PORT"
}

# ensure_test_tools installs what the tests drive besides the two servers:
# tmux runs the terminal UI in a real terminal for the end-to-end test, and
# Python with its cryptography package runs docs/audit.md's independent
# verifiers on real exports.
ensure_test_tools() {
	if ! command -v tmux >/dev/null 2>&1; then
		step "tools: installing tmux (the terminal UI's end-to-end test runs in it)"
		apt_install tmux
	fi
	if ! python3 -c 'import cryptography.hazmat.primitives.asymmetric.ed25519' >/dev/null 2>&1; then
		step "tools: installing python3 and python3-cryptography (the docs' audit verifiers run on real exports)"
		apt_install python3 python3-cryptography
	fi
}

main() {
	ensure_test_tools
	ensure_postgres_running
	ensure_postgres_tcp_login
	ensure_postgres_role_and_db
	ensure_governed_people
	ensure_rabbitmq_running
	ensure_guest_login
	ensure_plugins
	ensure_management_api
	ensure_sqs_running
	ensure_redis_running
	step "ready: postgres://$PG_ROLE@$PG_HOST:$PG_PORT/$PG_DB amqp://guest@$AMQP_HOST:$AMQP_PORT/ http://guest@$MGMT_HOST:$MGMT_PORT/ http://$SQS_HOST:$SQS_PORT (SQS) redis://$REDIS_HOST:$REDIS_PORT"
	# The servers prepared here are expiryctl's defaults; a URL set in the
	# environment wins over them. It is named, not printed: it may hold a
	# password.
	local var
	for var in EXPIRYCTL_DATABASE_URL EXPIRYCTL_AMQP_URL EXPIRYCTL_MANAGEMENT_URL; do
		if [[ -n ${!var:-} ]]; then
			step "note: $var is set in your environment: expiryctl connects where it says, not to the server prepared above"
		fi
	done
}

main "$@"
