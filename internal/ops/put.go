package ops

// Put copies a rank's source into a peer's destination (one-sided).
const Put = "put"

var _ = define(Put, def{order: 0, family: FamilyPut, help: "rank r writes --value into a peer's buffer (pair: rank 0 to --peer; ring: to r+1, --value + r)", runs: true, deliver: copyFrom})
