package ops

// Latency is a ping-pong of a put with signal between two ranks; bench times it,
// run does not test it.
const Latency = "latency"

var _ = define(Latency, def{order: 3, kind: PingPong, signals: true, deliver: copyFrom,
	title: "latency (half round trip of a put with signal)"})
