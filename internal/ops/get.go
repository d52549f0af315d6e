package ops

// Get copies a peer's source into this rank's destination: the receiver fetches.
const Get = "get"

var _ = define(Get, def{order: 1, kind: OneSided, pulls: true, runs: true, deliver: copyFrom})
