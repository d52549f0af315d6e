package ops

// Broadcast: Send and Recv are Bytes; Recv is rank Root's Send (on Root too).
const Broadcast = "broadcast"

var _ = define(Broadcast, def{order: 7, family: FamilyCollective, rooted: true, takes: []Setting{DTypeSetting, RootSetting}, help: "every rank ends with the input of rank --root", runs: true, deliver: copyFrom})
