package ops

// Broadcast: Send and Recv are Bytes; Recv is rank Root's Send (on Root too).
const Broadcast = "broadcast"

var _ = define(Broadcast, def{order: 7, kind: Collective, rooted: true, runs: true, deliver: copyFrom})
