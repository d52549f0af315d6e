package ops

// PutSignal puts and then, once the data is delivered, advances a signal on the peer,
// which waits on it alone before it reads.
const PutSignal = "put-signal"

var _ = define(PutSignal, def{order: 2, family: FamilyPutSignal, signals: true, help: "a put, then a signal the receiver waits on before it reads the data (no barrier)", runs: true, deliver: copyFrom})
