package ops

// PutSignal puts and then, once the data is delivered, advances a signal on the peer,
// which waits on it alone before it reads.
const PutSignal = "put-signal"

var _ = define(PutSignal, def{order: 2, kind: OneSided, signals: true, runs: true, deliver: copyFrom})
