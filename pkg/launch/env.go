package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The environment a worker reads. The launcher sets all of these; under an external
// launcher Discover derives them from that launcher's own variables.
const (
	EnvRank           = "SYMMEM_RANK"
	EnvLocalRank      = "SYMMEM_LOCAL_RANK"
	EnvWorldSize      = "SYMMEM_WORLD_SIZE"
	EnvLocalWorldSize = "SYMMEM_LOCAL_WORLD_SIZE"
	EnvStoreAddr      = "SYMMEM_STORE_ADDR"
	EnvStoreToken     = "SYMMEM_STORE_TOKEN"
	EnvJobID          = "SYMMEM_JOB_ID"
	EnvLaunchT0       = "SYMMEM_LAUNCH_T0" // launcher start, unix nanoseconds, for the time breakdown
	EnvWorker         = "SYMMEM_WORKER"    // "1" in processes the launcher started
)

// DefaultStorePort is where rank 0 hosts the store under an external launcher when
// neither --store-addr nor MASTER_ADDR/MASTER_PORT say otherwise.
const DefaultStorePort = 29517

// EnvStoreTokenFile names a file holding the store token (readable by its owner only),
// for launchers that do not pass the environment on.
const EnvStoreTokenFile = "SYMMEM_STORE_TOKEN_FILE"

// RankInfo is where this process sits in the job.
type RankInfo struct {
	Rank, LocalRank, WorldSize, LocalWorldSize int
	// StoreAddr is where every rank dials the store; ListenAddr where rank 0 hosts it
	// under an external launcher (its own address, or every interface, on a port).
	StoreAddr, ListenAddr string
	// AddrFrom names what gave StoreAddr, for errors: the caller's store-addr
	// (DiscoverOptions.Name), or the launcher's variables. StoreFlag is
	// DiscoverOptions'.
	AddrFrom, StoreFlag string
	// Token authenticates ranks with the store. Under an external launcher it comes
	// from SYMMEM_STORE_TOKEN or SYMMEM_STORE_TOKEN_FILE; on one host without either,
	// rank 0 makes one and shares it through TokenFile, a file only this user can read.
	Token, TokenFile string
	// TokenFrom names where a given token came from, for errors: SYMMEM_STORE_TOKEN
	// or SYMMEM_STORE_TOKEN_FILE ("" when rank 0 shares one through TokenFile).
	TokenFrom string
	JobID     string
	// Source names who started the process: "symmem", "torchrun", "slurm", "openmpi",
	// "pmi" or "" when nothing did (a plain single process).
	Source string
	// MultiHost is true when the job's ranks span several hosts.
	MultiHost bool
}

// Hosted reports whether this rank must host the store itself (rank 0 under an
// external launcher); under symmem's own launcher the launcher hosts it.
func (r RankInfo) Hosted() bool { return r.Source != "symmem" && r.Rank == 0 }

// Launchers lists what --launcher accepts.
var Launchers = []string{"auto", "local", "torchrun", "mpi", "slurm"}

// DiscoverOptions say how to read the environment.
type DiscoverOptions struct {
	// Launcher is "auto" (or ""), "local" (ignore every external launcher's
	// variables), or one of torchrun, mpi, slurm (only that one's).
	Launcher string
	// StoreAddr, when set, is rank 0's store address HOST:PORT.
	StoreAddr string
	// StoreIface names the network interface rank 0 listens on in a multi-host job
	// (default: every interface).
	StoreIface string
	// StoreFlag is the flag by which the program's command line gives StoreAddr
	// (symmem's --store-addr; "" when it has none): RankOf reads it in the command
	// line of another rank of the job.
	StoreFlag string
	// Getenv reads the environment (os.Getenv when nil); tests swap it.
	Getenv func(string) string
	// Name, where set, is the caller's name for each of the settings above that
	// Discover's errors speak of: "launcher", "store-addr", "store-iface" (symmem's
	// CLI: its flags). Left nil, the errors name them so.
	Name func(setting string) string
}

// name is setting as o's caller names it.
func (o DiscoverOptions) name(setting string) string {
	if o.Name == nil {
		return setting
	}
	return o.Name(setting)
}

type scheme struct {
	source                                string
	rank, size, localRank, localSize, job string
}

var schemes = []scheme{
	{"symmem", EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize, EnvJobID},
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "", "SLURM_JOB_ID"},
	{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", ""},
}

// launcherSchemes maps --launcher to the schemes it allows.
var launcherSchemes = map[string][]string{
	"auto": {"symmem", "torchrun", "openmpi", "slurm", "pmi"}, "": {"symmem", "torchrun", "openmpi", "slurm", "pmi"},
	"local": {"symmem"}, "torchrun": {"torchrun"}, "mpi": {"openmpi", "pmi"}, "slurm": {"slurm"},
}

// Discover reads the rank layout from the environment: symmem's own launcher first,
// then torchrun, Open MPI, Slurm and PMI (or only what --launcher names). ok is false
// when no launcher started this process.
func Discover(o DiscoverOptions) (info RankInfo, ok bool, err error) {
	env := envReader{get: o.Getenv}
	if env.get == nil {
		env.get = os.Getenv
	}
	allowed, known := launcherSchemes[o.Launcher]
	if !known {
		return info, false, fmt.Errorf("unknown %s %q: use %s", o.name("launcher"), o.Launcher, strings.Join(Launchers, ", "))
	}
	for _, s := range schemes {
		if !slices.Contains(allowed, s.source) {
			continue
		}
		if info, ok, err = discover(s, env, o); ok || err != nil {
			info.StoreFlag = o.StoreFlag
			return info, ok, err
		}
	}
	info = RankInfo{}
	if o.Launcher != "" && o.Launcher != "auto" && o.Launcher != "local" {
		return info, false, fmt.Errorf("%s %s: this process was not started by %s (its rank variable is not set); run it under %s or use %s auto",
			o.name("launcher"), o.Launcher, o.Launcher, o.Launcher, o.name("launcher"))
	}
	return info, false, nil
}

func discover(s scheme, env envReader, o DiscoverOptions) (RankInfo, bool, error) {
	info := RankInfo{Source: s.source}
	rank, has, err := env.int(s.rank)
	if err != nil || !has {
		return info, false, err
	}
	size, hasSize, err := env.int(s.size)
	if err != nil {
		return info, false, err
	}
	if !hasSize || size < 1 || rank < 0 || rank >= size {
		return info, false, fmt.Errorf("%s environment: rank %d of world size %d (%s) is not valid", s.source, rank, size, s.size)
	}
	info.Rank, info.WorldSize = rank, size
	if info.LocalRank, has, err = env.int(s.localRank); err != nil {
		return info, false, err
	} else if !has {
		return info, false, fmt.Errorf("%s environment: %s is set but %s is not: cannot tell which GPU this rank drives", s.source, s.rank, s.localRank)
	}
	if info.LocalWorldSize, err = localSize(s, env, size); err != nil {
		return info, false, err
	}
	if info.LocalRank < 0 || info.LocalRank >= info.LocalWorldSize || info.LocalWorldSize > size {
		return info, false, fmt.Errorf("%s environment: local rank %d of %d on this host, world size %d: the sizes do not fit together",
			s.source, info.LocalRank, info.LocalWorldSize, size)
	}
	info.MultiHost = info.LocalWorldSize < size
	if s.job != "" {
		info.JobID = SafeJobID(env.get(s.job))
	}
	if s.source == "symmem" {
		info.StoreAddr, info.Token = env.get(EnvStoreAddr), env.get(EnvStoreToken)
		return info, true, nil
	}
	if err := storeAddr(&info, env, o); err != nil {
		return info, false, err
	}
	if info.JobID == "" || info.JobID == "none" { // torchrun's default run id is "none"
		info.JobID = SafeJobID(strings.NewReplacer(":", "-", "[", "", "]", "").Replace(info.StoreAddr))
	}
	return info, true, token(&info, env)
}

// maxJobID is the longest job ID kept as it is: a file name's room, with symmem's
// prefix and suffix, and more than any launcher's own IDs take.
const maxJobID = 64

// SafeJobID is a job ID from the environment made fit to name files (the CPU heap in
// /dev/shm, the token file): an external launcher's ID is anyone's text
// (TORCHELASTIC_RUN_ID=x/../../tmp/y put the heap outside /dev/shm). An ID of letters,
// digits, dots, dashes and underscores that is no . or .. is kept; any other becomes
// its safe characters and a hash of the whole, so that two IDs stay two, and every
// rank, reading the same variable, makes the same name.
func SafeJobID(id string) string {
	safe := len(id) <= maxJobID && id != "." && id != ".."
	var keep strings.Builder
	for _, r := range id {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' && keep.Len() > 0 {
			if keep.Len() < 32 {
				keep.WriteRune(r)
			}
			continue
		}
		safe = false
	}
	if safe {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return keep.String() + "-" + hex.EncodeToString(sum[:6])
}

// localSize is how many ranks run on this host.
func localSize(s scheme, env envReader, size int) (int, error) {
	if s.source == "slurm" {
		// SLURM_TASKS_PER_NODE reads like "2(x3),1": this node's share is picked by
		// SLURM_NODEID.
		if v := env.get("SLURM_TASKS_PER_NODE"); v != "" {
			counts, err := ExpandTasksPerNode(v)
			if err != nil {
				return 0, fmt.Errorf("slurm environment: SLURM_TASKS_PER_NODE=%q: %v", v, err)
			}
			node, _, err := env.int("SLURM_NODEID")
			if err != nil {
				return 0, err
			}
			if node < 0 || node >= len(counts) {
				return 0, fmt.Errorf("slurm environment: SLURM_NODEID=%d but SLURM_TASKS_PER_NODE=%q lists %d nodes", node, v, len(counts))
			}
			return counts[node], nil
		}
		if n, has, err := env.int("SLURM_NTASKS_PER_NODE"); err != nil || has {
			return n, err
		}
		return size, nil
	}
	n, has, err := env.int(s.localSize)
	if !has && err == nil {
		n = size
	}
	return n, err
}

// storeAddr decides where rank 0 hosts the store and every rank dials it.
func storeAddr(info *RankInfo, env envReader, o DiscoverOptions) error {
	addr, from := o.StoreAddr, o.name("store-addr")
	if addr == "" {
		addr, from = env.get(EnvStoreAddr), EnvStoreAddr
	}
	if addr == "" {
		if host := env.get("MASTER_ADDR"); host != "" {
			from = fmt.Sprintf("%s environment: MASTER_ADDR=%q", info.Source, host)
			if _, _, err := net.SplitHostPort(net.JoinHostPort(host, "0")); err != nil {
				return fmt.Errorf("%s: not a host name or IP address; give rank 0's host (an IPv6 address without brackets), or %s HOST:PORT", from, o.name("store-addr"))
			}
			p := 0
			if v := env.get("MASTER_PORT"); v != "" {
				var err error
				if p, err = strconv.Atoi(v); err != nil || p < 0 || p > 65534 {
					return fmt.Errorf("%s environment: MASTER_PORT=%q: want a port from 1 to 65534 (symmem's store takes the one after it; 0 or unset: the default), or give %s HOST:PORT", info.Source, v, o.name("store-addr"))
				}
				from += fmt.Sprintf(", MASTER_PORT=%q", v)
			}
			if p == 0 {
				p = DefaultStorePort
			} else {
				p++ // torchrun's MASTER_PORT is its own store's; use the next one
			}
			addr = net.JoinHostPort(host, strconv.Itoa(p))
		}
	}
	if addr == "" && info.Source == "slurm" {
		for _, k := range []string{"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"} {
			if v := env.get(k); v != "" {
				hosts, err := ExpandNodeList(v)
				if err != nil {
					return fmt.Errorf("slurm environment: %s=%q: %v", k, v, err)
				}
				if info.MultiHost {
					addr, from = net.JoinHostPort(hosts[0], strconv.Itoa(DefaultStorePort)), fmt.Sprintf("slurm environment: %s=%q", k, v)
				}
				break
			}
		}
	}
	if addr == "" {
		if info.MultiHost {
			return fmt.Errorf("%s job spans several hosts: give rank 0's address with %s HOST:PORT (or MASTER_ADDR)", info.Source, o.name("store-addr"))
		}
		addr, from = net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultStorePort)), "the default store address of an external launcher's job"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT (%v)", from, addr, err)
	}
	info.StoreAddr, info.ListenAddr, info.AddrFrom = addr, addr, from
	if info.MultiHost {
		host := "" // every interface
		if o.StoreIface != "" {
			ip, err := ifaceIP(o.StoreIface, o.name("store-iface"))
			if err != nil {
				return err
			}
			host = ip
		}
		info.ListenAddr = net.JoinHostPort(host, port)
	}
	return nil
}

// ifaceIP is the IPv4 address of the interface name, which the caller calls setting.
func ifaceIP(name, setting string) (string, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("%s %s: %v", setting, name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v", setting, name, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("%s %s has no IPv4 address", setting, name)
}

type envReader struct{ get func(string) string }

func (e envReader) int(name string) (int, bool, error) {
	if name == "" {
		return 0, false, nil
	}
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, true, fmt.Errorf("environment %s=%q is not a whole number", name, v)
	}
	return n, true, nil
}

// WorkerEnv is the environment symmem's launcher gives rank `rank`: the parent's
// environment (never scrubbed: NVSHMEM_* and NCCL_* settings must reach the workers)
// plus the job's variables.
func WorkerEnv(base []string, rank, n int, addr, token, job string, t0 int64) []string {
	env := make([]string, 0, len(base)+9)
	for _, kv := range base {
		// Drop stale job variables (a symmem started from inside another job).
		if strings.HasPrefix(kv, "SYMMEM_RANK=") || strings.HasPrefix(kv, "SYMMEM_WORLD_SIZE=") ||
			strings.HasPrefix(kv, "SYMMEM_LOCAL_") || strings.HasPrefix(kv, "SYMMEM_STORE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		EnvRank+"="+strconv.Itoa(rank),
		EnvLocalRank+"="+strconv.Itoa(rank),
		EnvWorldSize+"="+strconv.Itoa(n),
		EnvLocalWorldSize+"="+strconv.Itoa(n),
		EnvStoreAddr+"="+addr,
		EnvStoreToken+"="+token,
		EnvJobID+"="+job,
		EnvLaunchT0+"="+strconv.FormatInt(t0, 10),
		EnvWorker+"=1",
	)
}

// RankOf says which rank of info's job another process of this host is, from its
// environment (env) and command line (args), discovered as this process was: one the
// same kind of launcher started for the job of the same ID, world size and store
// address, holding the same token where one was given (args give the store's address
// by info's StoreFlag). A rank that is stopped before it told anyone its pid is known
// only this way.
func RankOf(info RankInfo, env func(string) string, args []string) (int, bool) {
	launcher := map[string]string{"torchrun": "torchrun", "openmpi": "mpi", "pmi": "mpi", "slurm": "slurm"}[info.Source]
	if launcher == "" || env == nil {
		return 0, false
	}
	o := DiscoverOptions{Launcher: launcher, Getenv: env}
	if v, ok := flagValue(args, info.StoreFlag); ok && info.StoreFlag != "" {
		o.StoreAddr = v
	}
	other, ok, err := Discover(o)
	switch {
	case err != nil || !ok || other.Source != info.Source || other.WorldSize != info.WorldSize:
		return 0, false
	case other.JobID != info.JobID || other.StoreAddr != info.StoreAddr:
		return 0, false
	case info.TokenFrom != "" && other.Token != info.Token:
		return 0, false
	}
	return other.Rank, true
}

// flagValue is the value args give flag name ("--name V" or "--name=V"; the last one).
func flagValue(args []string, name string) (v string, ok bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			v, ok = args[i+1], true
		} else if after, found := strings.CutPrefix(a, name+"="); found {
			v, ok = after, true
		}
	}
	return v, ok
}
