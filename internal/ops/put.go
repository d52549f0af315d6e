package ops

// Put copies a rank's source into a peer's destination (one-sided).
const Put = "put"

// OneToAll is the pattern of a put from one rank, 0, into every other rank, each of
// which checks it holds the whole message (run --pattern one-to-all); pair and ring give
// each sender one receiver.
const OneToAll = "one-to-all"

var _ = define(Put, def{order: 0, family: FamilyPut, toAll: true, runs: true, deliver: copyFrom,
	help: "rank r writes --value into a peer's buffer (pair: rank 0 to --peer; ring: to r+1, --value + r; one-to-all: rank 0 to every other rank)"})
