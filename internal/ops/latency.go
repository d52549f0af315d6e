package ops

// Latency is a ping-pong of a put with signal between two ranks; bench times it,
// run does not test it.
const Latency = "latency"

var _ = define(Latency, def{order: 3, family: FamilyLatency, signals: true, help: "half the round trip of a put with signal between two ranks (bench only)", deliver: copyFrom,
	title: "latency (half round trip of a put with signal)"})
