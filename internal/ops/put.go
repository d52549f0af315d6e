package ops

// Put copies a rank's source into a peer's destination (one-sided).
const Put = "put"

var _ = define(Put, def{order: 0, kind: OneSided, runs: true, deliver: copyFrom})
