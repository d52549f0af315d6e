package ops

// PutFlag puts the data, orders it before what follows by a fence or a quiet (its
// variants), then puts a one-element flag; the receiver waits on the flag and then
// checks that all the data is there: the check is what proves the ordering.
const PutFlag = "put-flag"

// The orderings of put-flag, as --algo names them.
const (
	Fence = "fence" // nvshmem_fence: the puts to a peer land in the order they were issued
	Quiet = "quiet" // nvshmem_quiet: every put issued so far has landed
)

var _ = define(PutFlag, def{order: 12, family: FamilyPutFlag, flags: true, takes: []Setting{AlgoSetting}, help: "a put, a fence or a quiet, then a flag the receiver waits on before it checks the data", runs: true, extra: true, deliver: copyFrom,
	algos: []string{Fence, Quiet}, variants: true,
	title: "put-flag (data, then fence or quiet, then a flag the receiver waits on before it checks the data)"})
