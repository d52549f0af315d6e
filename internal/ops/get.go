package ops

// Get copies a peer's source into this rank's destination: the receiver fetches.
const Get = "get"

var _ = define(Get, def{order: 1, family: FamilyGet, pulls: true, help: "rank r reads a peer's buffer into its own (pair: rank 0 from --peer; ring: from r+1)", runs: true, deliver: copyFrom})
