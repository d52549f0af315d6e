#!/usr/bin/env bash
# slurm-local.sh: a single-node Slurm cluster on this machine, for testing.
#
# It lets the test suite and maintainers run symmem under a real srun on one
# machine (srun -n 2 symmem run put --backend cpu, ...), with no real cluster.
#
# What it does (Debian/Ubuntu, as root; works in containers without systemd):
#   - installs slurmctld, slurmd, slurm-client and munge from apt, if missing;
#   - makes a munge key if there is none, and starts munged;
#   - writes /etc/slurm/slurm.conf: cluster "local", this host as controller and
#     as the only node, partition "debug"; no cgroups, no accounting, no MPI plugin,
#     SlurmUser=root; the node advertises SLURM_LOCAL_CPUS CPUs (default: the
#     larger of nproc and 8) so jobs with more tasks than cores still fit;
#   - starts slurmctld and slurmd and waits until sinfo shows the node idle.
# Running it again is safe: what is installed stays, what runs is left running
# (the daemons are restarted only when slurm.conf changed).
#
# Usage:
#   scripts/slurm-local.sh            install (if needed) and start
#   scripts/slurm-local.sh --stop     stop slurmctld, slurmd and munged
#   scripts/slurm-local.sh --status   show what runs
# Environment: SLURM_LOCAL_CPUS (see above), SLURM_LOCAL_TIMEOUT (seconds to
#   wait for the node to be idle, default 60).
# A slurm.conf this script did not write is kept as slurm.conf.bak.<time>.
# Logs: /var/log/slurm/slurmctld.log, /var/log/slurm/slurmd.log.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGE_PID=/run/munge/munged.pid
MUNGE_KEY=/etc/munge/munge.key
LOGDIR=/var/log/slurm
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}

log() { printf 'slurm-local: %s\n' "$*"; }
die() { printf 'slurm-local: error: %s\n' "$*" >&2; exit 1; }

# alive PIDFILE: true when the pid file names a live process.
alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pid NAME PIDFILE: end the process the pid file names and wait for it.
stop_pid() {
	local name=$1 f=$2 pid i
	if ! alive "$f"; then
		log "$name is not running"
		rm -f "$f"
		return 0
	fi
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
	log "stopped $name (pid $pid)"
}

status() {
	local n
	for n in "munged:$MUNGE_PID" "slurmctld:$CTLD_PID" "slurmd:$SLURMD_PID"; do
		if alive "${n#*:}"; then
			log "${n%%:*} running (pid $(cat "${n#*:}"))"
		else
			log "${n%%:*} not running"
		fi
	done
	if command -v sinfo >/dev/null && alive "$CTLD_PID"; then
		sinfo
	fi
}

stop() {
	stop_pid slurmd "$SLURMD_PID"
	stop_pid slurmctld "$CTLD_PID"
	stop_pid munged "$MUNGE_PID"
}

install_packages() {
	local missing=() c
	for c in slurmctld slurmd srun munged; do
		command -v "$c" >/dev/null || missing+=("$c")
	done
	if ((${#missing[@]} == 0)); then
		log "packages already installed (slurmd $(dpkg-query -W -f '${Version}' slurmd 2>/dev/null || echo ?))"
		return 0
	fi
	command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get: install Slurm and munge by hand"
	log "installing slurmctld slurmd slurm-client munge"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		slurmctld slurmd slurm-client munge >/dev/null
	log "installed slurmd $(dpkg-query -W -f '${Version}' slurmd)"
}

start_munge() {
	install -d -o munge -g munge -m 0700 /etc/munge
	install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
	install -d -o munge -g munge -m 0755 /run/munge
	if [[ ! -s $MUNGE_KEY ]]; then
		log "making a munge key"
		if command -v mungekey >/dev/null; then
			mungekey --create --keyfile="$MUNGE_KEY" --force
		else
			dd if=/dev/urandom of="$MUNGE_KEY" bs=1 count=1024 status=none
		fi
	fi
	chown munge:munge "$MUNGE_KEY"
	chmod 0400 "$MUNGE_KEY"
	if alive "$MUNGE_PID"; then
		log "munged already running (pid $(cat "$MUNGE_PID"))"
	else
		log "starting munged"
		runuser -u munge -- /usr/sbin/munged
	fi
	munge -n | unmunge >/dev/null || die "munge does not work (munge -n | unmunge failed)"
}

write_conf() {
	local host cpus tmp
	host=$(hostname -s)
	cpus=${SLURM_LOCAL_CPUS:-$(($(nproc) > 8 ? $(nproc) : 8))}
	getent hosts "$host" >/dev/null || die "this host's name $host does not resolve: add it to /etc/hosts"
	install -d -m 0755 /etc/slurm "$LOGDIR" /var/spool/slurmctld /var/spool/slurmd
	tmp=$(mktemp)
	cat >"$tmp" <<EOF
# Written by scripts/slurm-local.sh: a single-node cluster for testing.
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node may advertise more CPUs than it has, so that srun -n 4 fits on 2 cores.
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
	if [[ -f $CONF ]] && cmp -s "$tmp" "$CONF"; then
		rm -f "$tmp"
		log "$CONF unchanged"
		return 1
	fi
	if [[ -f $CONF ]] && ! grep -q '^# Written by scripts/slurm-local.sh' "$CONF"; then
		cp -p "$CONF" "$CONF.bak.$(date +%Y%m%d%H%M%S)"
		log "kept the existing $CONF as $CONF.bak.*"
	fi
	install -m 0644 "$tmp" "$CONF"
	rm -f "$tmp"
	log "wrote $CONF (node $host, $cpus CPUs)"
	return 0
}

start_slurm() {
	local changed=$1 host i state
	host=$(hostname -s)
	if ((changed)) && { alive "$CTLD_PID" || alive "$SLURMD_PID"; }; then
		log "slurm.conf changed: restarting the daemons"
		stop_pid slurmd "$SLURMD_PID"
		stop_pid slurmctld "$CTLD_PID"
	fi
	if alive "$CTLD_PID"; then
		log "slurmctld already running (pid $(cat "$CTLD_PID"))"
	else
		log "starting slurmctld"
		/usr/sbin/slurmctld
	fi
	if alive "$SLURMD_PID"; then
		log "slurmd already running (pid $(cat "$SLURMD_PID"))"
	else
		log "starting slurmd"
		/usr/sbin/slurmd
	fi
	for ((i = 0; i < TIMEOUT; i++)); do
		state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
		case $state in
		idle | mixed | allocated | completing) break ;;
		*drain* | down*)
			if ((i == 5)); then
				log "node is $state: resuming it"
				scontrol update NodeName="$host" State=RESUME || true
			fi
			;;
		esac
		sleep 1
	done
	case $state in
	idle | mixed | allocated | completing) ;;
	*) die "node $host is '${state:-unknown}' after ${TIMEOUT}s: see $LOGDIR/slurmctld.log and $LOGDIR/slurmd.log" ;;
	esac
	log "ready: node $host is $state"
	sinfo
}

main() {
	case ${1:-} in
	--stop) stop; return ;;
	--status) status; return ;;
	"" | --start) ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; return ;;
	*) die "unknown argument $1 (use --stop, --status or nothing)" ;;
	esac
	[[ $(id -u) == 0 ]] || die "run this as root"
	install_packages
	start_munge
	local changed=0
	if write_conf; then changed=1; fi
	start_slurm "$changed"
}

main "$@"
